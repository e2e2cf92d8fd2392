package etcd

import (
	"context"
	"errors"
	"time"

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
// leader killed without resigning is replaced after about that long
// (the other replicas commit their changes themselves meanwhile).
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
