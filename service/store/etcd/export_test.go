package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// InjectTxnFault makes every guarded etcd transaction of s (a commit, a
// snapshot's flip: those with a comparison) call fault first and, when it
// returns an error, fail with it instead of reaching etcd (fault
// injection for tests; call it before the store commits).
func (s *Store) InjectTxnFault(fault func() error) {
	s.cli.KV = &faultKV{KV: s.cli.KV, fault: fault}
}

// faultKV is a KV whose transactions go through fault.
type faultKV struct {
	clientv3.KV
	fault func() error
}

// Txn returns a transaction that calls fault when committed.
func (k *faultKV) Txn(ctx context.Context) clientv3.Txn {
	return &faultTxn{Txn: k.KV.Txn(ctx), fault: k.fault}
}

// faultTxn is a transaction that fails when fault says so, if guarded.
type faultTxn struct {
	clientv3.Txn
	fault   func() error
	guarded bool
}

func (t *faultTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn, t.guarded = t.Txn.If(cs...), len(cs) > 0
	return t
}
func (t *faultTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *faultTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

// Commit fails with fault's error, or commits.
func (t *faultTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.guarded {
		if err := t.fault(); err != nil {
			return nil, err
		}
	}
	return t.Txn.Commit()
}
