// Package assets holds what the app ships inside the binary: the icon now,
// sample datasets later.
package assets

import _ "embed"

// Icon is the application icon, a 256×256 PNG.
//
//go:embed icon.png
var Icon []byte
