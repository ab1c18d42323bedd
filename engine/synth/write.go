package synth

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/hearthstudio/hearth/gguf"
)

// Write writes a model of preset p to w as o says: the layout Plan gives,
// with random weights made from o.Seed. The data is made by GOMAXPROCS
// workers a chunk at a time and streamed out in order, so memory stays at
// a few chunks per core whatever the model's size. On an error w holds a
// partial file.
func Write(w io.Writer, p Preset, o Options) error {
	l, err := Plan(p, o)
	if err != nil {
		return err
	}
	return l.write(o.Context, w, o.Progress)
}

// WriteFile writes a model of preset p to path as Write does. It writes
// path+".tmp" and renames it to path once it is complete and synced, so a
// failed or interrupted run (o.Context canceled, a full disk) never leaves
// a partial file under path; on an error the temporary file is removed.
func WriteFile(path string, p Preset, o Options) error {
	l, err := Plan(p, o)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	fail := func(err error) error {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	if err := l.write(o.Context, fh, o.Progress); err != nil {
		return fail(err)
	}
	if err := fh.Sync(); err != nil {
		return fail(fmt.Errorf("synth: %s: sync: %w", tmp, err))
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("synth: %s: close: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// chunk is one piece of a tensor's data: rows [lo, hi) of tensor index, or
// the whole of a tensor that is not a matrix. A worker fills buf and
// closes done.
type chunk struct {
	index  int // tensor
	n      int // chunk number within the tensor
	lo, hi int
	size   int
	buf    []byte
	err    error
	done   chan struct{}
}

// chunks splits tensor i of l into the pieces workers make.
func (l *Layout) chunks(i int, emit func(*chunk) bool) bool {
	t := l.Tensors[i]
	if len(t.Shape) < 2 || l.specs[i].kind != kindMatrix {
		// A vector, or a stack of them (gpt-oss's experts' biases: a
		// few hundred KB at most), drawn in one piece.
		return emit(&chunk{index: i, hi: 1, size: int(t.Size), done: make(chan struct{})})
	}
	cols := int(t.Shape[0])
	rows := int(elements(t.Shape)) / cols
	rowBytes := int(t.Size) / rows
	per := max(1, directChunkValues/cols)
	if pooled(t, l.specs[i].kind) {
		per = max(1, pooledChunkBytes/rowBytes)
	}
	for n, lo := 0, 0; lo < rows; n, lo = n+1, lo+per {
		hi := min(rows, lo+per)
		if !emit(&chunk{index: i, n: n, lo: lo, hi: hi, size: (hi - lo) * rowBytes, done: make(chan struct{})}) {
			return false
		}
	}
	return true
}

// write writes the model l lays out to out.
func (l *Layout) write(ctx context.Context, out io.Writer, progress func(Progress)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	gen, err := newGenerator(l, l.seed)
	if err != nil {
		return err
	}
	// Hide out's ReadFrom (an *os.File has one) from the gguf.Writer's
	// bufio.Writer: with it, bufio hands the tensor readers straight to
	// the file, which copies them through a 32 KB buffer, a system call
	// per 32 KB; without it, bufio writes its full 1 MB buffer each time.
	w := gguf.NewWriter(struct{ io.Writer }{out})
	if err := setMetadata(w, l.Preset, l.Quant, l.seed, l.vocab); err != nil {
		return err
	}
	for _, t := range l.Tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Shape); err != nil {
			return err
		}
	}
	if err := w.WriteHeader(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan *chunk, workers)
	// ordered holds the chunks in file order for the writer; its capacity
	// bounds how far the workers run ahead of it.
	ordered := make(chan *chunk, 2*workers)
	free := make(chan []byte, 3*workers+1)

	go func() {
		defer close(ordered)
		defer close(jobs)
		for i := range l.Tensors {
			ok := l.chunks(i, func(c *chunk) bool {
				select {
				case ordered <- c:
				case <-ctx.Done():
					return false
				}
				select {
				case jobs <- c:
					return true
				case <-ctx.Done():
					c.err = ctx.Err()
					close(c.done)
					return false
				}
			})
			if !ok {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var scratch []float32
			for c := range jobs {
				select {
				case c.buf = <-free:
				default:
				}
				if cap(c.buf) < c.size {
					c.buf = make([]byte, c.size)
				}
				c.buf = c.buf[:c.size]
				t := l.Tensors[c.index]
				if kind := l.specs[c.index].kind; kind == kindMatrix {
					c.err = gen.fillMatrix(t, c.n, c.lo, c.hi, c.buf, &scratch)
				} else {
					gen.fillVector(l.Preset, t, kind, c.buf)
				}
				close(c.done)
			}
		})
	}
	err = l.drain(ctx, w, ordered, free, progress)
	cancel()
	for range ordered {
		// Let the producer see the cancellation and finish.
	}
	wg.Wait()
	if err != nil {
		return err
	}
	return w.Close()
}

// drain writes the chunks of ordered to w tensor by tensor.
func (l *Layout) drain(ctx context.Context, w *gguf.Writer, ordered <-chan *chunk, free chan<- []byte, progress func(Progress)) error {
	r := &chunkReader{ctx: ctx, ordered: ordered, free: free}
	var done int64
	for i, t := range l.Tensors {
		r.onChunk = func(n int) {
			done += int64(n)
			if progress != nil {
				progress(Progress{Tensor: t.Name, Index: i, Count: len(l.Tensors), BytesDone: done, BytesTotal: int64(l.TensorBytes)})
			}
		}
		if err := w.WriteTensor(t.Name, r); err != nil {
			if r.err != nil {
				return r.err
			}
			return err
		}
	}
	return nil
}

// chunkReader reads the data of the chunks it takes from ordered, waiting
// for each to be filled, and recycles their buffers.
type chunkReader struct {
	ctx     context.Context
	ordered <-chan *chunk
	free    chan<- []byte
	onChunk func(bytes int)

	cur *chunk
	off int
	err error // why the data stopped: a worker's error or the cancellation
}

func (r *chunkReader) Read(b []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.cur == nil {
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("synth: %w", err)
			return 0, r.err
		}
		c, ok := <-r.ordered
		if !ok {
			r.err = fmt.Errorf("synth: %w", r.ctx.Err())
			if r.ctx.Err() == nil {
				r.err = io.ErrUnexpectedEOF
			}
			return 0, r.err
		}
		select {
		case <-c.done:
		case <-r.ctx.Done():
			r.err = fmt.Errorf("synth: %w", r.ctx.Err())
			return 0, r.err
		}
		if c.err != nil {
			r.err = c.err
			return 0, r.err
		}
		r.cur, r.off = c, 0
	}
	n := copy(b, r.cur.buf[r.off:])
	r.off += n
	if r.off == len(r.cur.buf) {
		select {
		case r.free <- r.cur.buf:
		default:
		}
		r.onChunk(len(r.cur.buf))
		r.cur = nil
	}
	return n, nil
}
