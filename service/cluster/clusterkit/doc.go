// Package clusterkit is the test kit of the project's single-node cluster
// (make cluster): it hands the running cluster to one test at a time,
// runs kubectl, kpt and programs against it or inside its network
// namespace, installs blueprints/ipam as its README says, and runs Jobs.
// Tests of every component that need pods import it.
package clusterkit
