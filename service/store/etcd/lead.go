package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The write lead: replicas that can forward writes to each other (the
// server decides, see Lead) elect one of them, through an etcd election
// under PREFIX/lead/, to make every change. The leader pipelines its
// commits (group.go) and the others forward their callers' changes to it,
// so changes of one network instance share transactions instead of
// racing for the head. The lead is only a matter of speed: every
// transaction still compares the head, so a replica that commits without
// the lead (no leader yet, the leader unreachable, a replica that does
// not forward) is as safe as before, and a leader that lost a race
// reloads its state from etcd.

// LeaseTTL is the time to live, in seconds, of the leader's lease: a
// leader lost without resigning is replaced after about that long (the
// other replicas commit their changes themselves meanwhile), unless the
// others see its process gone and depose it at once (Depose).
const LeaseTTL = 3

// Lead makes this replica campaign for the write lead until Close,
// advertising addr, the gRPC address the other replicas forward writes
// to, and follow which replica holds it (Leader). Call it after Restore.
func (s *Store) Lead(addr string) {
	s.self.Store(addr)
	s.rounds.Add(2)
	go func() {
		defer s.rounds.Done()
		s.campaign(addr)
	}()
	go func() {
		defer s.rounds.Done()
		s.observe()
	}()
}

// Leader returns the address of the replica that holds the write lead
// ("" when none is known) and whether it is this one.
func (s *Store) Leader() (addr string, self bool) {
	addr, _ = s.leader.Load().(string)
	return addr, s.lead.Load()
}

// campaign wins the write lead when it can and holds it while its lease
// lives; it resigns when the store closes, so that another replica takes
// over at once.
func (s *Store) campaign(addr string) {
	for s.ctx.Err() == nil {
		sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(LeaseTTL), concurrency.WithContext(s.ctx))
		if err != nil {
			s.log.Warn("etcd: no lease for the write lead; retrying", "err", err)
			s.pause(time.Second)
			continue
		}
		el := concurrency.NewElection(sess, s.leadPfx)
		if err := el.Campaign(s.ctx, addr); err != nil {
			_ = sess.Close() // revokes the lease; it expires anyway
			if s.ctx.Err() == nil {
				s.log.Warn("etcd: campaigning for the write lead; retrying", "err", err)
				s.pause(time.Second)
			}
			continue
		}
		// Catch up first, so that the first pipelined transaction finds
		// the head where this replica is.
		if err := s.catchUp(&staleError{}); err != nil {
			s.log.Warn("etcd: catching up before leading", "err", err)
		}
		s.contended.Store(time.Now().UnixNano()) // the others may still commit by themselves
		s.lead.Store(true)
		s.log.Info("etcd: this replica holds the write lead", "addr", addr)
		select {
		case <-sess.Done():
			s.log.Warn("etcd: the write lead's lease expired")
		case <-s.ctx.Done():
		}
		s.lead.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		if err := el.Resign(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Debug("etcd: resigning the write lead", "err", err)
		}
		cancel()
		_ = sess.Close() // revokes the lease; it expires anyway
	}
}

// DeposeInterval is the least time between two depositions by one
// replica (Depose): a replica wrong about a leader costs at most one lead
// change per interval.
const DeposeInterval = LeaseTTL * time.Second

// Depose ends the write lead of the replica advertising addr, if it still
// holds it and is not this one, by revoking the lease of its election
// key: the next candidate leads at once instead of when the lease
// expires. Call it on strong evidence that the leader's process is gone
// (the server's forwarder calls it when a fresh connection to the leader
// is refused). A live leader deposed by mistake only loses the lead and
// campaigns again: the lead is a matter of speed, every transaction
// compares the head. It deposes at most once per DeposeInterval and
// reports whether it revoked a lease.
func (s *Store) Depose(addr string) (bool, error) {
	if self, _ := s.self.Load().(string); addr == "" || addr == self {
		return false, nil
	}
	last := s.deposed.Load()
	if last != 0 && time.Since(time.Unix(0, last)) < DeposeInterval {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.leadPfx, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return false, fmt.Errorf("store etcd: reading the write lead to depose %s: %w", addr, err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != addr || resp.Kvs[0].Lease == 0 {
		return false, nil // it no longer leads
	}
	if !s.deposed.CompareAndSwap(last, time.Now().UnixNano()) {
		return false, nil // another deposition just ran
	}
	// The lease is the leader's own: a later leader has another key and
	// lease, so this revokes nothing but what was read.
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := s.cli.Revoke(ctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil // expired meanwhile
		}
		return false, fmt.Errorf("store etcd: revoking the lease %x of the write lead %s: %w", int64(lease), addr, err)
	}
	s.log.Warn("etcd: deposed the write lead, whose process is gone", "leader", addr, "lease", fmt.Sprintf("%x", int64(lease)))
	return true, nil
}

// observe follows which replica holds the write lead: the oldest key
// under PREFIX/lead/ (an etcd election's order).
func (s *Store) observe() {
	for s.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		resp, err := s.cli.Get(ctx, s.leadPfx, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		cancel()
		if err != nil {
			s.pause(time.Second)
			continue
		}
		leader := ""
		if len(resp.Kvs) > 0 {
			leader = string(resp.Kvs[0].Value)
		}
		s.leader.Store(leader)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
		wch := s.cli.Watch(wctx, s.leadPfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		<-wch // any change (or the end of the watch): read again
		wcancel()
	}
}
