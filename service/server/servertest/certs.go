package servertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Certs are PEM files of a test PKI: a CA, a server certificate for
// 127.0.0.1 and localhost (common name ipam-server, usable as a client
// certificate too, as a replica's is), and a client certificate (common
// name ipamctl), all signed by the CA.
type Certs struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string

	dir    string
	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
}

// WriteCerts makes a fresh CA, server and client certificate in dir.
func WriteCerts(t testing.TB, dir string) Certs {
	t.Helper()
	caKey, caCert := newCA(t, "ipam test CA")
	c := Certs{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		dir: dir, caKey: caKey, caCert: caCert,
	}
	writePEM(t, c.CA, "CERTIFICATE", caCert.Raw)
	writeLeaf(t, caKey, caCert, c.ServerCert, c.ServerKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ipam-server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	writeLeaf(t, caKey, caCert, c.ClientCert, c.ClientKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ipamctl"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return c
}

// ClientCert describes a client certificate WriteClient makes.
type ClientCert struct {
	CommonName string
	URIs       []string  // URI SANs, e.g. a SPIFFE id
	DNSNames   []string  // DNS SANs
	NotAfter   time.Time // zero: a day from now
	// ExtKeyUsage is the certificate's extended key usage; nil:
	// client authentication.
	ExtKeyUsage []x509.ExtKeyUsage
}

// WriteClient makes a client certificate signed by c's CA and returns its
// certificate and key files.
func (c Certs) WriteClient(t testing.TB, name string, cc ClientCert) (cert, key string) {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cc.CommonName},
		DNSNames:    cc.DNSNames,
		ExtKeyUsage: cc.ExtKeyUsage,
	}
	if tmpl.ExtKeyUsage == nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, u := range cc.URIs {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if !cc.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = cc.NotAfter.Add(-time.Hour), cc.NotAfter
	}
	cert, key = filepath.Join(c.dir, name+".pem"), filepath.Join(c.dir, name+"-key.pem")
	writeLeafAt(t, c.caKey, c.caCert, cert, key, tmpl)
	return cert, key
}

// ClientTLS returns a client TLS configuration that trusts c.CA and, with
// withCert, presents the client certificate.
func (c Certs) ClientTLS(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	pemCA, err := os.ReadFile(c.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc
}

var serial atomic.Int64

func newCA(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func writeLeaf(t testing.TB, caKey *ecdsa.PrivateKey, ca *x509.Certificate, certFile, keyFile string, tmpl *x509.Certificate) {
	t.Helper()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	writeLeafAt(t, caKey, ca, certFile, keyFile, tmpl)
}

// writeLeafAt writes a leaf certificate valid from tmpl.NotBefore to
// tmpl.NotAfter.
func writeLeafAt(t testing.TB, caKey *ecdsa.PrivateKey, ca *x509.Certificate, certFile, keyFile string, tmpl *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
