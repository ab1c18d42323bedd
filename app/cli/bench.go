package cli

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/model"
)

// benchResult is one row of hearth bench, as llama-bench reports them.
type benchResult struct {
	Test      string    `json:"test"` // pp512, tg128
	Tokens    int       `json:"tokens"`
	TPS       float64   `json:"tokens_per_second"`
	StdDev    float64   `json:"stddev"`
	Samples   []float64 `json:"samples"`
	Bandwidth float64   `json:"weight_read_gb_per_s,omitempty"` // decode: weight bytes × tokens/s
}

type benchReport struct {
	Model       string        `json:"model"`
	Arch        string        `json:"architecture"`
	Params      int64         `json:"parameters"`
	WeightBytes int64         `json:"weight_bytes"`
	Backend     string        `json:"backend"`
	Context     int           `json:"context"`
	Results     []benchResult `json:"results"`
}

func newBenchCmd() *cobra.Command {
	var mf modelFlags
	var prompt, gen, reps int
	var asJSON bool
	var profile string
	cmd := &cobra.Command{
		Use:   "bench -m MODEL [-p 512] [-n 128]",
		Short: "Measure prefill and decode tokens/s, like llama-bench",
		Long: "Prefill: -p random tokens evaluated from an empty cache, one batch per submit.\n" +
			"Decode: -n tokens, each one forward pass and one submit with the greedy token read back,\n" +
			"after a prompt of 1 token. Each test runs -r times after one warm-up; mean ± stddev of tokens/s.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if prompt < 0 || gen < 0 || reps < 1 {
				return fmt.Errorf("-p %d, -n %d, -r %d: want -p, -n >= 0 and -r >= 1", prompt, gen, reps)
			}
			if mf.ctx == 0 {
				mf.ctx = prompt + gen + 1
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
			m := l.model
			if prompt+1 > l.runner.Context() || gen+1 > l.runner.Context() {
				return fmt.Errorf("-p %d / -n %d do not fit the %d-token context", prompt, gen, l.runner.Context())
			}
			rep := benchReport{Model: mf.path, Arch: m.Config.Arch, Backend: backendName(l), Context: l.runner.Context()}
			rep.Params = int64(m.File.ParameterCount())
			rep.WeightBytes = m.Memory(1, 1).Weights
			rng := rand.New(rand.NewPCG(1, 2))
			randomTokens := func(n int) []int32 {
				ids := make([]int32, n)
				for i := range ids {
					ids[i] = int32(rng.IntN(m.Config.Vocab))
				}
				return ids
			}
			run := func(name string, n int, once func() error) error {
				var samples []float64
				for i := range reps + 1 {
					start := time.Now()
					if err := once(); err != nil {
						return err
					}
					if i > 0 { // the first run warms pipelines and caches
						samples = append(samples, float64(n)/time.Since(start).Seconds())
					}
				}
				mean, sd := meanStd(samples)
				r := benchResult{Test: name, Tokens: n, TPS: mean, StdDev: sd, Samples: samples}
				if name[:2] == "tg" {
					r.Bandwidth = float64(rep.WeightBytes) * mean / 1e9
				}
				rep.Results = append(rep.Results, r)
				return nil
			}
			r := l.runner
			if prompt > 0 {
				ids := randomTokens(prompt)
				if err := run(fmt.Sprintf("pp%d", prompt), prompt, func() error {
					_, err := r.Forward(ids, 0, model.Output{TopK: 1})
					return err
				}); err != nil {
					return err
				}
			}
			if gen > 0 {
				if err := run(fmt.Sprintf("tg%d", gen), gen, func() error {
					res, err := r.Forward(randomTokens(1), 0, model.Output{TopK: 1})
					for i := 0; err == nil && i < gen; i++ {
						res, err = r.Forward([]int32{int32(res.IDs[0])}, i+1, model.Output{TopK: 1})
					}
					return err
				}); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeTokenJSON(w, rep)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "model\tarch\tsize\tparams\tbackend\ttest\tt/s\t\n")
			for _, res := range rep.Results {
				fmt.Fprintf(tw, "%s\t%s\t%.2f GiB\t%.2f B\t%s\t%s\t%.2f ± %.2f\t\n", rep.Model, rep.Arch,
					float64(rep.WeightBytes)/(1<<30), float64(rep.Params)/1e9, rep.Backend, res.Test, res.TPS, res.StdDev)
			}
			return tw.Flush()
		},
	}
	mf.register(cmd)
	cmd.Flags().IntVarP(&prompt, "prompt", "p", 512, "prompt tokens for the prefill test; 0 skips it")
	cmd.Flags().IntVarP(&gen, "n", "n", 128, "tokens for the decode test; 0 skips it")
	cmd.Flags().IntVarP(&reps, "repetitions", "r", 3, "runs of each test after the warm-up")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for go tool pprof)")
	return cmd
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
