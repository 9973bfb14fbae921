package local

// SetSync makes p call sync where it would flush a file or a directory to
// disk (the tests record what is flushed, and when).
func SetSync(p *Plugin, sync func(path string) error) { p.sync = sync }

// SetLimits lowers the bounds of an artifact's unpacking (bytes written,
// entries; the decompressed tar stream to twice the bytes) for a test; it
// returns a function that restores them.
func SetLimits(bytes int64, entries int) (restore func()) {
	b, e, s := maxUnpacked, maxEntries, streamSlack
	maxUnpacked, maxEntries, streamSlack = bytes, entries, 0
	return func() { maxUnpacked, maxEntries, streamSlack = b, e, s }
}

// SetNestedBudget lowers how many entries the search for owned
// directories below a target directory reads; it returns a function that
// restores it.
func SetNestedBudget(n int) (restore func()) {
	b := nestedBudget
	nestedBudget = n
	return func() { nestedBudget = b }
}
