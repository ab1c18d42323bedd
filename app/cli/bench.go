package cli

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/internal/units"
)

// benchResult is one row of hearth bench, as llama-bench reports them.
type benchResult struct {
	Test      string    `json:"test"` // pp512, tg128
	Tokens    int       `json:"tokens"`
	TPS       float64   `json:"tokens_per_second"`
	StdDev    float64   `json:"stddev"`
	Samples   []float64 `json:"samples"`
	Bandwidth float64   `json:"weight_read_gb_per_s,omitempty"` // decode: the weight bytes a token reads × tokens/s
}

type benchReport struct {
	Model       string `json:"model"`
	Arch        string `json:"architecture"`
	Params      int64  `json:"parameters"`
	WeightBytes int64  `json:"weight_bytes"`
	// DecodeBytes is the weight bytes a decoded token reads: WeightBytes,
	// less the experts a mixture's token does not run.
	DecodeBytes int64  `json:"decode_weight_bytes"`
	Backend     string `json:"backend"`
	Context     int    `json:"context"`
	Sampler     string `json:"sampler,omitempty"`
	// Dispatches is the kernel launches of one decoded token on the GPU
	// (0 on the CPU): on a small model, launch cost rather than arithmetic
	// bounds decode, so this is the number to compare across builds.
	Dispatches int           `json:"dispatches_per_token,omitempty"`
	Results    []benchResult `json:"results"`
	// Profile is where a decoded token's GPU time goes (--profile).
	Profile *model.DecodeProfile `json:"decode_profile,omitempty"`
}

func newBenchCmd() *cobra.Command {
	var mf modelFlags
	var prompt, gen, reps, depth int
	var asJSON, gpuProfile bool
	var profile, sampler string
	var parallel []int
	cmd := &cobra.Command{
		Use:   "bench -m MODEL [-p 512] [-n 128] [-d 0]",
		Short: "Measure prefill and decode tokens/s, like llama-bench",
		Long: "Prefill: -p random tokens evaluated from an empty cache, one batch per submit.\n" +
			"Decode: -n tokens generated after a 1-token prompt, as chat generates them: one forward pass\n" +
			"and one submit per token, the sampling of --sampler; with -d, after a -d-token prompt instead, so\n" +
			"each token attends to that much history (llama-bench's depth). With --parallel N, also N sequences decoded\n" +
			"together (as hearth serve --parallel runs N requests): each prefilled with the same prompt length, then -n\n" +
			"steps of one token each, greedy on the host; the rate is all N sequences' tokens a second (llama-batched-bench's\n" +
			"S_TG). Each test runs -r times after one warm-up; mean ± stddev of tokens/s.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if prompt < 0 || gen < 0 || reps < 1 || depth < 0 {
				return fmt.Errorf("-p %d, -n %d, -r %d, -d %d: want -p, -n, -d >= 0 and -r >= 1", prompt, gen, reps, depth)
			}
			opts, err := benchSampler(sampler)
			if err != nil {
				return err
			}
			if mf.ctx == 0 {
				mf.ctx = max(prompt, depth+1) + gen + 1
			}
			for _, n := range parallel {
				if n < 2 || n > maxParallel {
					return fmt.Errorf("--parallel %d: want 2 to %d sequences (1 is the decode test itself)", n, maxParallel)
				}
				mf.slots = max(mf.slots, n)
			}
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			m := l.Model
			if prompt+1 > l.Runner.Context() || max(depth, 1)+gen+1 > l.Runner.Context() {
				return fmt.Errorf("-p %d / -n %d -d %d do not fit the %d-token context", prompt, gen, depth, l.Runner.Context())
			}
			rep := benchReport{Model: mf.path, Arch: m.Config.Arch, Backend: l.Backend.String(), Context: l.Runner.Context()}
			rep.Params = int64(m.File.ParameterCount())
			rep.WeightBytes = m.Memory(1, 1).Weights
			rep.DecodeBytes = m.DecodeWeightBytes()
			rng := rand.New(rand.NewPCG(1, 2))
			randomTokens := func(n int) []int32 {
				ids := make([]int32, n)
				for i := range ids {
					ids[i] = int32(rng.IntN(m.Config.Vocab))
				}
				return ids
			}
			// run measures a test reps times after a warm-up run; once
			// returns one run's tokens/s.
			run := func(name string, n int, once func() (float64, error)) error {
				var samples []float64
				for i := range reps + 1 {
					tps, err := once()
					if err != nil {
						return err
					}
					if i > 0 { // the first run warms pipelines and caches
						samples = append(samples, tps)
					}
				}
				mean, sd := meanStd(samples)
				r := benchResult{Test: name, Tokens: n, TPS: mean, StdDev: sd, Samples: samples}
				if strings.HasPrefix(name, "tg") {
					r.Bandwidth = float64(rep.DecodeBytes) * mean / 1e9
				}
				rep.Results = append(rep.Results, r)
				return nil
			}
			r := l.Runner
			if prompt > 0 {
				ids := randomTokens(prompt)
				if err := run(fmt.Sprintf("pp%d", prompt), prompt, func() (float64, error) {
					start := time.Now()
					_, err := r.Forward(ids, 0, model.Output{TopK: 1})
					return float64(prompt) / time.Since(start).Seconds(), err
				}); err != nil {
					return err
				}
			}
			if g, ok := r.(*model.GPU); ok {
				k, err := g.DecodeKernels(0)
				if err != nil {
					return err
				}
				rep.Dispatches = len(k)
			}
			if gen > 0 {
				rep.Sampler = sampler
				name := fmt.Sprintf("tg%d", gen)
				if depth > 0 {
					name += fmt.Sprintf("@d%d", depth)
				}
				if err := run(name, gen, func() (float64, error) {
					// A generation as chat runs it, from a one-token
					// prompt (or a depth-token one); the rate counts the
					// tokens after the first.
					req := model.Request{Prompt: randomTokens(max(depth, 1)), MaxTokens: gen + 1, Sampling: opts}
					st, err := model.NewSession(r).Generate(cmd.Context(), req, func(model.Token) error { return nil })
					return st.DecodeRate(), err
				}); err != nil {
					return err
				}
			}
			for _, n := range parallel {
				if gen == 0 {
					break
				}
				if err := run(fmt.Sprintf("tg%d x%d", gen, n), gen*n, func() (float64, error) {
					return parallelDecode(r, n, max(depth, 1), gen, randomTokens)
				}); err != nil {
					return err
				}
			}
			if gpuProfile {
				g, ok := r.(*model.GPU)
				if !ok {
					return fmt.Errorf("--profile times GPU dispatches; the model runs on %s", l.Backend)
				}
				// At the decode test's history: the token after its
				// prompt and the tokens it generated.
				p, err := g.ProfileDecode(min(max(depth, 1)+gen, r.Context()-1), 3)
				if err != nil {
					return err
				}
				rep.Profile = &p
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeTokenJSON(w, rep)
			}
			if rep.Profile != nil {
				defer fmt.Fprint(w, "\n", rep.Profile)
			}
			if rep.Dispatches > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "decode: %d dispatches per token (%d layers)\n", rep.Dispatches, m.Config.Layers)
			}
			return writeBenchTable(w, rep)
		},
	}
	mf.register(cmd)
	cmd.Flags().IntVarP(&prompt, "prompt", "p", 512, "prompt tokens for the prefill test; 0 skips it")
	cmd.Flags().IntVarP(&gen, "n", "n", 128, "tokens for the decode test; 0 skips it")
	cmd.Flags().IntVarP(&reps, "repetitions", "r", 3, "runs of each test after the warm-up")
	cmd.Flags().IntVarP(&depth, "depth", "d", 0, "tokens of history the decode test starts from (a prompt of that length, not timed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	cmd.Flags().BoolVar(&gpuProfile, "profile", false, "on the GPU, time every dispatch of a decoded token (prefixes of its chain) and print where the token's time goes, by kernel")
	cmd.Flags().StringVar(&sampler, "sampler", "greedy", "decode test's sampling: greedy (argmax on the GPU), topk (temperature 0.8, top-k 40 on the GPU, the draw on the host) or host (top-k off: all logits read back, the sampler on the host)")
	cmd.Flags().IntSliceVar(&parallel, "parallel", nil, "also decode N sequences together, for each N listed (4,8,16)")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for go tool pprof)")
	return cmd
}

// parallelDecode prefills n slots of r with prompts of depth random
// tokens (untimed), then decodes gen steps of one token in each, all in
// one Runner.Decode a step, each sequence's token drawn greedily by the
// host's sampler, as a session does with a batched step's logits; it
// returns the tokens of all sequences a second.
func parallelDecode(r model.Runner, n, depth, gen int, randomTokens func(int) []int32) (float64, error) {
	greedy, err := sample.New(sample.Options{Temperature: 0})
	if err != nil {
		return 0, err
	}
	steps := make([]model.Step, n)
	for s := range steps {
		res, err := r.ForwardSlot(s, randomTokens(depth), 0, model.Output{TopK: 1})
		if err != nil {
			return 0, err
		}
		steps[s] = model.Step{Slot: s, Token: int32(res.IDs[0]), Pos: depth}
	}
	start := time.Now()
	for range gen {
		res, err := r.Decode(steps)
		if err != nil {
			return 0, err
		}
		for s := range steps {
			steps[s].Token = greedy.Sample(res[s].Logits, nil)
			steps[s].Pos++
		}
	}
	return float64(n*gen) / time.Since(start).Seconds(), nil
}

// benchSampler is the sampling of a --sampler name.
func benchSampler(name string) (sample.Options, error) {
	o := sample.Defaults()
	switch name {
	case "greedy":
		o.Temperature = 0
	case "topk":
	case "host":
		o.TopK = 0
	default:
		return o, fmt.Errorf("--sampler %q: want greedy, topk or host", name)
	}
	return o, nil
}

func meanStd(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	if len(x) > 1 {
		sd = math.Sqrt(sd / float64(len(x)-1))
	}
	return mean, sd
}

// writeBenchTable prints the results as llama-bench's table does, sizes
// and counts in units that suit them, so a test model's 885 KiB does not
// read as 0.00 GiB.
func writeBenchTable(w io.Writer, rep benchReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "model\tarch\tsize\tparams\tbackend\ttest\tt/s\t\n")
	for _, res := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f ± %.2f\t\n", rep.Model, rep.Arch,
			units.Bytes(uint64(rep.WeightBytes)), units.Count(uint64(rep.Params)), rep.Backend, res.Test, res.TPS, res.StdDev)
	}
	return tw.Flush()
}
