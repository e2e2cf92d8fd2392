// Package cluster holds the project's single-node Kubernetes cluster
// (`make cluster`, cluster.sh) and the tests that prove the blueprints on
// it: pods of the product's images, run by kubelet and containerd, with
// their probes, RBAC under service-account tokens, certificates, Service
// DNS names and volumes, as users run them. The tools the cluster needs
// live beside it: netns-forward (the API server's loopback forwarder),
// pause (the sandbox image) and ipam-load (the allocation load a test runs
// as a pod).
package cluster
