// Package containertest runs ipam-fn the way users run it in container
// mode: the images `make images` builds, ipam-server as a container with
// its data on a docker volume on a private docker network, and
// `kpt fn render --allow-network` with `image: docker.io/library/ipam-fn:dev`
// in the Kptfile pipeline. Its only content is the end-to-end test; it
// skips, loudly, when docker is not available.
package containertest
