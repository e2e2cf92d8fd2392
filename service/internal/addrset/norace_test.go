//go:build !race

package addrset

// raceEnabled shortens the slowest tests under the race detector.
const raceEnabled = false
