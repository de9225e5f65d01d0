// Package units owns everything systemd: the bus connection and its
// reconnects, unit names, typed unit properties, starting, stopping and
// listing transient units, and the Watcher that turns PropertiesChanged
// signals into a stream of unit states.
//
// It knows nothing of jobs: callers hand it names and property lists.
package units
