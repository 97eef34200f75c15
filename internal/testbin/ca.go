package testbin

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
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made in a test: the TLS tests of the
// server and of the cluster sign their server, client and peer
// certificates with it.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, for a --tls-client-ca or --peer-tls-ca file
}

var serial atomic.Int64

// NewCA makes a CA valid for an hour either side of now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "chronoq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Sign issues a leaf certificate for the usages (one for server auth names
// 127.0.0.1) and returns its PEM certificate and key and its serial.
func (ca *CA) Sign(t testing.TB, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, sn *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "chronoq test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	if slices.Contains(usages, x509.ExtKeyUsageServerAuth) {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), tmpl.SerialNumber
}

// Pool is a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// PeerPEM issues a cluster member's certificate for 127.0.0.1: members are
// both the servers and the clients of each other's connections.
func (ca *CA) PeerPEM(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, _ = ca.Sign(t, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return certPEM, keyPEM
}

// Peer is PeerPEM as a key pair.
func (ca *CA) Peer(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(ca.PeerPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
