package local

// SetSync makes p call sync where it would flush a file or a directory to
// disk (the tests record what is flushed, and when).
func SetSync(p *Plugin, sync func(path string) error) { p.sync = sync }
