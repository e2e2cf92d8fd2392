// Command nv-ipam is the CNI IPAM plugin of NVIDIA's IPAM: the container
// runtime runs it; it asks the node daemon ipam-node for addresses. See
// service/node/cni.
package main

import "github.com/nephio-project/ipam/service/node/cni"

func main() {
	cni.Main()
}
