package injector

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// keptVersions bounds how many resourceVersions of one Draft the injector
// remembers.
const keptVersions = 16

// staleReadLimit is how long the injector refuses to build on a version
// of a Draft that the watch showed replaced. Porch puts its cache right at
// its next refresh of the repository: the next write to it, or its
// periodic sync (--repo-sync-frequency, default 10 minutes). A version
// that Porch still serves after this long is taken as current (say, the
// Draft's branch was reset to it in Git).
const staleReadLimit = 15 * time.Minute

// staleRetryLimit bounds the delay between the reads of a Draft that
// Porch keeps serving at a replaced version; it doubles from
// staleAnswerRetry.
const staleRetryLimit = time.Minute

// versionLog remembers, per Draft, the resourceVersions its watch showed,
// in the order Porch sent them, and the writes the injector made.
//
// Porch v1.5.8 gives every write of a Draft's resources a new
// resourceVersion (the commit), and checks a write's resourceVersion
// against its cache of the repository. A repository refresh that overlaps
// a write can put the cache back to the listing it took before that write
// (it replaces the whole cache at its end): Porch then serves, and accepts
// writes on, the version the write replaced, until its next refresh. A
// write accepted on that version replaces the newer one in Git. The watch
// did show the newer version (Porch sends it when the write completes), so
// the log lets the injector refuse to build on a version it has seen
// replaced by someone else, and tell when a write of its own replaced a
// version it never read.
type versionLog struct {
	mu     sync.Mutex
	drafts map[types.NamespacedName]*draftVersions
}

// draftVersions is what the log holds of one Draft.
type draftVersions struct {
	// seen are the versions the watch showed, oldest first, each once
	// (at its first appearance), at most keptVersions.
	seen []string
	// own are the versions Porch answered the injector's writes with, at
	// most keptVersions.
	own []string
	// wrote is the injector's last write that the watch has not shown
	// yet: the version it read and the one Porch answered.
	wrote *ownWrite
	// refused is the replaced version Porch served last, since when, and
	// how many reads found it.
	refused      string
	refusedSince time.Time
	refusals     int
}

// ownWrite is one write of the injector.
type ownWrite struct{ read, answer string }

func (l *versionLog) draft(key types.NamespacedName) *draftVersions {
	if l.drafts == nil {
		l.drafts = map[types.NamespacedName]*draftVersions{}
	}
	d := l.drafts[key]
	if d == nil {
		d = &draftVersions{}
		l.drafts[key] = d
	}
	return d
}

// observe records a version the watch showed. When it is the answer of
// the injector's last write, it returns the versions the watch showed
// between the version that write read and the write: writes of someone
// else that the injector's write replaced (Porch accepted it on a version
// it had put back). They are in order on the watch: Porch sends a write's
// version before it answers it.
func (l *versionLog) observe(key types.NamespacedName, version string) (overwritten []string) {
	if version == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.draft(key)
	if w := d.wrote; w != nil && w.answer == version {
		d.wrote = nil
		from := slices.Index(d.seen, w.read) // its first appearance; -1: shown before the log began
		for _, v := range d.seen[from+1:] {
			if v != w.read && v != w.answer {
				overwritten = append(overwritten, v)
			}
		}
	}
	if !slices.Contains(d.seen, version) {
		d.seen = keepLast(append(d.seen, version))
	}
	return overwritten
}

// keepLast drops all but the last keptVersions versions of vs.
func keepLast(vs []string) []string {
	if len(vs) > keptVersions {
		vs = slices.Delete(vs, 0, len(vs)-keptVersions)
	}
	return vs
}

// wrote records a write of the injector: Porch accepted it on read and
// answered with answer.
func (l *versionLog) wrote(key types.NamespacedName, read, answer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.draft(key)
	d.wrote = &ownWrite{read: read, answer: answer}
	d.own = keepLast(append(d.own, answer))
}

// superseded reports whether version was replaced by someone else: after
// its first appearance the watch showed a version that had not appeared
// before it and that is not the answer to a write of the injector. A
// version that the watch shows again after a newer one (Porch's cache put
// back) stays superseded, and the newer one does not become superseded by
// it. A version replaced only by the injector's own writes is not: a
// write built on it again writes what they wrote.
func (l *versionLog) superseded(key types.NamespacedName, version string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.drafts[key]
	return d != nil && d.superseded(version)
}

// superseded is versionLog.superseded for this Draft; the log's mutex
// must be held.
func (d *draftVersions) superseded(version string) bool {
	i := slices.Index(d.seen, version)
	if version == "" || i < 0 {
		return false
	}
	for _, v := range d.seen[i+1:] {
		if !slices.Contains(d.own, v) {
			return true
		}
	}
	return false
}

// shown reports whether the watch showed version.
func (l *versionLog) shown(key types.NamespacedName, version string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.drafts[key]
	return d != nil && slices.Contains(d.seen, version)
}

// refuse reports whether a read that found the Draft at version is to be
// dropped, and when to read it again: version is superseded, and Porch has
// served it for less than staleReadLimit. The delay doubles with every
// such read, from staleAnswerRetry to staleRetryLimit.
func (l *versionLog) refuse(key types.NamespacedName, version string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.drafts[key]
	if d == nil || !d.superseded(version) {
		return 0, false
	}
	if d.refused != version {
		d.refused, d.refusedSince, d.refusals = version, now, 0
	}
	if now.Sub(d.refusedSince) >= staleReadLimit {
		return 0, false
	}
	d.refusals++
	return min(staleAnswerRetry<<min(d.refusals-1, 8), staleRetryLimit), true
}

// forget drops what the log holds of a Draft.
func (l *versionLog) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.drafts, key)
}

// forgetAllBut drops what the log holds of Drafts not in live.
func (l *versionLog) forgetAllBut(live map[types.NamespacedName]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key := range l.drafts {
		if !live[key] {
			delete(l.drafts, key)
		}
	}
}
