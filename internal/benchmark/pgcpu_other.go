//go:build !linux

package benchmark

import "time"

// pgCPU is not measured here: 0.
func (b *bench) pgCPU() time.Duration { return 0 }
