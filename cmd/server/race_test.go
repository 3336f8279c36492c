//go:build race

package main

// raceEnabled: this test binary runs under the race detector, which multiplies the memory a
// process holds, so memory bounds cannot be checked.
const raceEnabled = true
