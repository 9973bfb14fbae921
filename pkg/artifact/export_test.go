package artifact

// SetAfterOpen sets a function run between the open of a file:// artifact
// and its checks (nil: none).
func SetAfterOpen(f func(path string)) { afterOpen = f }
