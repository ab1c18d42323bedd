package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal, where progress bars go; piped
// or redirected output gets plain lines instead.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newBytesBar is the progress bar of a long write of total bytes, or nil when
// w is not a terminal. count adds the "n/m" count to the bar.
func newBytesBar(w io.Writer, total int64, count bool) *progressbar.ProgressBar {
	if !isTerminal(w) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		// A redraw per chunk would flood a slow terminal; 10 a second reads
		// as smooth.
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
	}
	if count {
		opts = append(opts, progressbar.OptionShowCount())
	}
	return progressbar.NewOptions64(total, opts...)
}

// lineAboveBar prints s on a line of its own above bar, or plainly where
// there is no bar (nil).
func lineAboveBar(w io.Writer, bar *progressbar.ProgressBar, s string) {
	if bar != nil {
		bar.Clear()
	}
	fmt.Fprintln(w, s)
}
