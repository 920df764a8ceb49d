package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/natsauth"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// selfSigned writes a certificate and key for 127.0.0.1 and returns their
// files and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ledger test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// With --tls-cert and --tls-key the API speaks HTTPS only.
func TestServeTLS(t *testing.T) {
	certFile, keyFile, roots := selfSigned(t)
	token, tokens := testenv.AdminToken(t)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		natsURL := testenv.NATS(t)
		done <- api.Serve(ctx, api.ServeConfig{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, NATSCreds: testenv.Creds(t, natsURL, natsauth.Ledger), DatabaseURL: testdb.New(t).API,
			Migrate: true, TLSCert: certFile, TLSKey: keyFile, Options: []api.Option{api.WithTokens(tokens)},
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Ready: func(a string) { ready <- a }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		// net/http's own errors (the plain HTTP request below failed its
		// TLS handshake) are records of the process's log, JSON here.
		handshake := false
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("a log line is not JSON: %q", line)
			}
			if rec["component"] == "http" && strings.Contains(fmt.Sprint(rec["msg"]), "TLS handshake error") {
				handshake = true
			}
		}
		if !handshake {
			t.Errorf("no record of the failed TLS handshake:\n%s", logs.String())
		}
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("serve not ready")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: contract.ForTest(t).Transport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}})}
	c := client.New("https://"+addr, client.WithToken(token), client.WithHTTPClient(hc))
	var res client.Allocations
	if err := c.Get(ctx, "/v1/pools/p/allocations", &res); err != nil || res.Pool != "p" {
		t.Errorf("allocations over HTTPS: %+v %v", res, err)
	}
	// The TLS layer's answer (400), not the API's: not checked.
	if resp, err := contract.Unchecked().Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered 200 on the TLS port")
		}
	}
}
