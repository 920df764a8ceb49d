package main

import (
	"testing"

	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, contract.InstallDefault) }
