package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
)

// replicaCreds returns how this replica dials the one holding the write
// lead, or nil when replicas cannot relay and each commits its own
// changes:
//
//   - plaintext (tlsConf nil): plaintext, the callers' bearer tokens
//     relayed with their calls;
//   - mTLS (clientCAs) with a policy that names replicas: TLS presenting
//     this replica's server certificate as its client certificate, so
//     that the leader believes the caller names it relays; the leader's
//     own certificate must verify against the client CA and be one of
//     the replicas (its address is a pod's, which its certificate does
//     not name). This replica's certificate is checked at start: it must
//     verify against the client CA for both server and client
//     authentication and be one of the replicas, else Run fails;
//   - TLS without a client CA, or a policy naming no replicas: nil (a
//     leader could not tell a replica's statement of its caller from a
//     client's).
func replicaCreds(tlsConf *tls.Config, clientCAs *x509.CertPool, policy *authz.Policy) (credentials.TransportCredentials, error) {
	if tlsConf == nil {
		return insecure.NewCredentials(), nil
	}
	if clientCAs == nil || policy == nil || !policy.HasReplicas() {
		return nil, nil
	}
	cert := tlsConf.Certificates[0]
	chain, err := x509.ParseCertificates(bytes.Join(cert.Certificate, nil))
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	if err := verifyReplica(chain[0], chain[1:], clientCAs, policy, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, fmt.Errorf("--tls-cert: this replica relays changes to the write lead under mTLS (the authorization policy names replicas), so its certificate must be a replica's: %w", err)
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// The leader is dialed at the address it advertises, which its
		// certificate does not name: VerifyConnection verifies it
		// against the client CA and the policy's replicas instead.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the write lead presented no certificate")
			}
			if err := verifyReplica(cs.PeerCertificates[0], cs.PeerCertificates[1:], clientCAs, policy, x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("the write lead is not a replica: %w", err)
			}
			return nil
		},
	}), nil
}

// verifyReplica checks that leaf (with the intermediates inter) verifies
// against cas for each of usages and that one of its names is a replica
// of policy.
func verifyReplica(leaf *x509.Certificate, inter []*x509.Certificate, cas *x509.CertPool, policy *authz.Policy, usages ...x509.ExtKeyUsage) error {
	pool := x509.NewCertPool()
	for _, c := range inter {
		pool.AddCert(c)
	}
	for _, u := range usages {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, Intermediates: pool, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return fmt.Errorf("certificate %s, verified against --client-ca for %s: %w", ipam.Quote(leaf.Subject.String()), usageName(u), err)
		}
	}
	names := certNames(leaf)
	if !policy.Replica(authz.Principal{Names: names}) {
		return fmt.Errorf("certificate %s: none of its names (%s) is listed under replicas in the authorization policy", ipam.Quote(leaf.Subject.String()), ipam.Quote(strings.Join(names, ", ")))
	}
	return nil
}

// usageName names an extended key usage as openssl's extendedKeyUsage
// does.
func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprint(u)
}
