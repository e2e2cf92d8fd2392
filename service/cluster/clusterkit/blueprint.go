package clusterkit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// IPAMNamespace is the namespace blueprints/ipam installs into.
const IPAMNamespace = "ipam-system"

// Blueprint is blueprints/ipam installed on the cluster as its README
// says: the trial certificates, kpt live init and kpt live apply
// --reconcile-timeout=3m, which must exit 0 with every Deployment
// Available.
type Blueprint struct {
	// C is the cluster it is installed on.
	C *Cluster
	// Pkg is the installed copy of the package.
	Pkg string
	// Certs holds the trial certificates.
	Certs string
}

// InstallIPAM installs a copy of blueprints/ipam and removes it, with
// everything it made, when t ends. edit, when set, changes the copy's
// files before it is applied (the kpt-set fields a user edits by hand:
// apply-setters needs its image).
func InstallIPAM(t *testing.T, c *Cluster, edit func(pkg string)) *Blueprint {
	t.Helper()
	tmp := t.TempDir()
	b := &Blueprint{C: c, Certs: filepath.Join(tmp, "certs")}
	b.Pkg = CopyPackage(t, c, "ipam", tmp)
	if edit != nil {
		edit(b.Pkg)
	}
	t.Cleanup(func() { b.remove(t) })
	if out, err := c.Run(filepath.Join(b.Pkg, "trial-certs.sh"), IPAMNamespace, b.Certs); err != nil {
		t.Fatalf("trial-certs.sh: %v\n%s", err, out)
	}
	b.Kpt(t, "live", "init", b.Pkg)
	start := time.Now()
	b.Kpt(t, "live", "apply", b.Pkg, "--reconcile-timeout=3m")
	t.Logf("kpt live apply --reconcile-timeout=3m: reconciled in %s", time.Since(start).Round(time.Second))
	for _, d := range []string{"ipam-server", "ipam-controller", "ipam-injector"} {
		c.MustKubectl(t, "-n", IPAMNamespace, "wait", "--for=condition=Available", "deploy/"+d, "--timeout=60s")
	}
	return b
}

// CopyPackage copies blueprints/NAME into dir, without an inventory, and
// returns the copy's path.
func CopyPackage(t *testing.T, c *Cluster, name, dir string) string {
	t.Helper()
	pkg := filepath.Join(dir, name)
	if out, err := exec.Command("cp", "-r", filepath.Join(c.Root, "blueprints", name), pkg).CombinedOutput(); err != nil {
		t.Fatalf("copy blueprints/%s: %v\n%s", name, err, out)
	}
	_ = os.Remove(filepath.Join(pkg, "resourcegroup.yaml"))
	return pkg
}

func (b *Blueprint) Kpt(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.C.Kpt(args...)
	if err != nil {
		b.Dump(t)
		t.Fatalf("kpt %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Dump logs what the pods of the namespace are doing, for a failure.
func (b *Blueprint) Dump(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"-n", IPAMNamespace, "get", "pods,pvc,deploy,jobs", "-o", "wide"},
		{"-n", IPAMNamespace, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", IPAMNamespace, "logs", "--all-containers", "--prefix", "--tail=30", "-l", "app.kubernetes.io/part-of=ipam"},
	} {
		out, _ := b.C.Kubectl(args...)
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
}

// remove deletes what the test made in namespace default first (the
// controller's finalizers need the controller), then the package with kpt
// live destroy, and frees the server's volume.
func (b *Blueprint) remove(t *testing.T) {
	if t.Failed() {
		b.Dump(t)
	}
	_, _ = b.C.Kubectl("delete", "ipallocations.ipam.nephio.org,ipprefixes.ipam.nephio.org,networkinstances.ipam.nephio.org", "--all", "-n", "default", "--timeout=60s")
	if out, err := b.C.Kpt("live", "destroy", b.Pkg); err != nil {
		t.Errorf("kpt live destroy: %v\n%s", err, out)
	}
	_, _ = b.C.Kubectl("wait", "--for=delete", "namespace/"+IPAMNamespace, "--timeout=120s")
	b.C.FreeVolumes(t)
}

// JobManifest is a Job of one pod in the namespace running image with
// args, non-root, with the Secret tlsSecret at /tls.
func JobManifest(name, image, tlsSecret string, args ...string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s}
spec:
  backoffLimit: 0
  ttlSecondsAfterFinished: 600
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: main
          image: %s
          imagePullPolicy: IfNotPresent
          args: [%s]
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: tls, mountPath: /tls, readOnly: true}]
      volumes: [{name: tls, secret: {secretName: %s}}]
`, name, IPAMNamespace, image, FlowList(args), tlsSecret)
}

// Job runs JobManifest's Job and returns its logs once it completes.
func (b *Blueprint) Job(t *testing.T, name, image, tlsSecret string, args ...string) string {
	t.Helper()
	b.C.Apply(t, JobManifest(name, image, tlsSecret, args...))
	t.Cleanup(func() { _, _ = b.C.Kubectl("-n", IPAMNamespace, "delete", "job", name, "--wait=false") })
	b.WaitJob(t, name, 3*time.Minute)
	return b.C.MustKubectl(t, "-n", IPAMNamespace, "logs", "job/"+name)
}

// WaitJob waits until the Job completes; it fails t, with the Job's logs,
// when the Job fails or the time is up.
func (b *Blueprint) WaitJob(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "Job "+name+" completes", func() error {
		out, err := b.C.Kubectl("-n", IPAMNamespace, "get", "job", name, "-o", `jsonpath={.status.succeeded} {.status.failed}`)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		succeeded, failed, _ := strings.Cut(out, " ")
		if failed != "" && failed != "0" {
			logs, _ := b.C.Kubectl("-n", IPAMNamespace, "logs", "job/"+name)
			t.Fatalf("Job %s failed:\n%s", name, logs)
		}
		if succeeded != "1" {
			return fmt.Errorf("Job %s: succeeded %q", name, succeeded)
		}
		return nil
	})
}

// Ipamctl runs ipamctl as a pod through the Service's DNS name, with the
// controller's identity (which may read).
func (b *Blueprint) Ipamctl(t *testing.T, name string, args ...string) string {
	t.Helper()
	return b.Job(t, name, "ipamctl:dev", "ipam-controller-tls", append([]string{"--server", "ipam-server.ipam-system.svc:9090",
		"--tls-ca", "/tls/ca.crt", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key"}, args...)...)
}

// FlowList writes strs as the items of a YAML flow sequence (without its
// brackets), each quoted.
func FlowList(strs []string) string {
	quoted := make([]string, len(strs))
	for i, a := range strs {
		q, _ := json.Marshal(a)
		quoted[i] = string(q)
	}
	return strings.Join(quoted, ", ")
}
