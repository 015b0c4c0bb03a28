package dist

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// envOf is a lookup over a fixed environment.
func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolve(t *testing.T) {
	torch := []string{"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "MASTER_ADDR=10.0.0.5", "MASTER_PORT=29500"}
	slurm := []string{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_JOB_ID=123456", "SLURM_STEP_ID=0",
		"SLURM_STEP_NODELIST=gpu[017-020]", "SLURM_LAUNCH_NODE_IPADDR=10.1.1.1"}
	for _, tc := range []struct {
		name  string
		flags Flags
		env   []string
		want  World
	}{
		{"alone", Flags{}, nil, World{Size: 1}},
		{"torchrun", Flags{}, torch, World{Rank: 1, Size: 4, LocalRank: 1, Master: "10.0.0.5:29500", Source: "torchrun"}},
		{"torchrun world of one", Flags{}, []string{"RANK=0", "WORLD_SIZE=1"}, World{Size: 1}},
		{"flags agree with torchrun", Flags{Rank: "1", WorldSize: "4", Master: "10.0.0.5:29500"}, torch,
			World{Rank: 1, Size: 4, LocalRank: 1, Master: "10.0.0.5:29500", Source: "flags and torchrun"}},
		{"flags alone, local rank defaults to the rank", Flags{Rank: "2", WorldSize: "3", Master: "h:1"}, nil,
			World{Rank: 2, Size: 3, LocalRank: 2, Master: "h:1", Source: "flags"}},
		{"flags fill torchrun's master", Flags{Master: "[::1]:7"}, []string{"RANK=0", "WORLD_SIZE=2"},
			World{Size: 2, Master: "[::1]:7", Source: "torchrun"}},
		{"slurm: host from the node list, port from the job", Flags{}, slurm,
			World{Rank: 5, Size: 8, LocalRank: 1, Master: "gpu017:23456", RunID: "slurm-123456.0", Source: "slurm"}},
		{"slurm: the step's task count wins", Flags{}, append(slurm, "SLURM_STEP_NUM_TASKS=6"),
			World{Rank: 5, Size: 6, LocalRank: 1, Master: "gpu017:23456", RunID: "slurm-123456.0", Source: "slurm"}},
		{"slurm: MASTER_ADDR and MASTER_PORT win", Flags{}, append(slurm, "MASTER_ADDR=head", "MASTER_PORT=4000"),
			World{Rank: 5, Size: 8, LocalRank: 1, Master: "head:4000", RunID: "slurm-123456.0", Source: "slurm"}},
		{"slurm: a batch script's own process is not a rank", Flags{}, []string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0",
			"SLURM_JOB_ID=7", "SLURM_NODELIST=gpu[1-2]"}, World{Size: 1, RunID: "slurm-7"}},
		{"slurm: launch node without a node list", Flags{}, []string{"SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
			"SLURM_JOB_ID=7", "SLURM_LAUNCH_NODE_IPADDR=10.1.1.1"},
			World{Rank: 1, Size: 2, Master: "10.1.1.1:20007", RunID: "slurm-7.0", Source: "slurm"}},
		{"torchrun hides slurm", Flags{}, append(append([]string{}, slurm...), torch...),
			World{Rank: 1, Size: 4, LocalRank: 1, Master: "10.0.0.5:29500", RunID: "slurm-123456.0", Source: "torchrun"}},
		{"file rendezvous with torchrun's run id and restart count", Flags{File: "/shared/id"},
			[]string{"RANK=1", "WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=abc", "TORCHELASTIC_RESTART_COUNT=3"},
			World{Rank: 1, Size: 2, LocalRank: 1, File: "/shared/id", RunID: "abc.3", Source: "torchrun"}},
		{"ours wins over torchrun's run id", Flags{}, []string{"RANK=1", "WORLD_SIZE=2", "OOC_RENDEZVOUS_FILE=/s/f", "OOC_RUN_ID=x",
			"TORCHELASTIC_RUN_ID=abc"}, World{Rank: 1, Size: 2, LocalRank: 1, File: "/s/f", RunID: "x", Source: "torchrun"}},
		{"timeout kept", Flags{Timeout: time.Second}, nil, World{Size: 1, Timeout: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.flags, envOf(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got.Multi() != (tc.want.Size > 1) {
				t.Errorf("Multi() = %v for size %d", got.Multi(), got.Size)
			}
		})
	}
}

// A bad setting is refused with an error that names it and its value.
func TestResolveRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags Flags
		env   []string
		want  []string // all in the error
	}{
		{"rank out of range", Flags{}, []string{"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1"}, []string{"rank", `"4"`, "out of range", "0..3"}},
		{"negative rank", Flags{Rank: "-1", WorldSize: "2", Master: "h:1"}, nil, []string{"rank", `"-1"`, "out of range"}},
		{"world size 0", Flags{}, []string{"RANK=0", "WORLD_SIZE=0"}, []string{"world size", `"0"`, "at least 1"}},
		{"non-numeric rank", Flags{}, []string{"RANK=one", "WORLD_SIZE=2"}, []string{"RANK", `"one"`, "not a whole number"}},
		{"non-numeric flag", Flags{WorldSize: "2x", Rank: "0"}, nil, []string{"-world-size", `"2x"`, "not a whole number"}},
		{"non-numeric slurm", Flags{}, []string{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=many"}, []string{"SLURM_NTASKS", `"many"`}},
		{"local rank beyond the world", Flags{}, []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=2", "MASTER_ADDR=h", "MASTER_PORT=1"},
			[]string{"local rank", `"2"`, "out of range"}},
		{"master does not parse", Flags{}, []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=a b", "MASTER_PORT=1"},
			[]string{"MASTER_ADDR and MASTER_PORT", `"a b:1"`, "not a host name"}},
		{"master port out of range", Flags{Master: "h:70000"}, nil, []string{"-master", `"h:70000"`, "1..65535"}},
		{"master without a port", Flags{Master: "h"}, nil, []string{"-master", `"h"`, "not a host:port"}},
		{"MASTER_PORT alone", Flags{}, []string{"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=1"}, []string{"MASTER_PORT", "MASTER_ADDR is not"}},
		{"MASTER_ADDR alone", Flags{}, []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h"}, []string{"MASTER_ADDR", "MASTER_PORT is not"}},
		{"flag conflicts with the environment", Flags{Rank: "0"}, []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"},
			[]string{"-rank", `"0"`, "conflicts with RANK=\"1\""}},
		{"master flag conflicts", Flags{Master: "a:1"}, []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=b", "MASTER_PORT=1"},
			[]string{"-master", "conflicts with MASTER_ADDR and MASTER_PORT"}},
		{"slurm conflicts too", Flags{WorldSize: "1", Rank: "0"}, []string{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=4"}, []string{"-world-size", "SLURM_NTASKS"}},
		{"rank without a world size", Flags{}, []string{"RANK=1"}, []string{"RANK", "WORLD_SIZE is not"}},
		{"world size without a rank", Flags{}, []string{"WORLD_SIZE=2"}, []string{"WORLD_SIZE", "RANK is not"}},
		{"-rank without -world-size", Flags{Rank: "1"}, nil, []string{"-rank", "needs -world-size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Resolve(tc.flags, envOf(tc.env...))
			if err == nil {
				t.Fatalf("accepted: %+v", w)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("%v is not a *ConfigError", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// Resolve takes a world with no way to meet (a caller may hand the id out
// its own way); Validate, and so Share, refuse it saying what to set.
func TestValidateRendezvous(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags Flags
		env   []string
		want  []string
	}{
		{"no rendezvous", Flags{}, []string{"RANK=0", "WORLD_SIZE=2"}, []string{"rendezvous", "MASTER_ADDR", "-rendezvous-file"}},
		{"file without a run id", Flags{File: "/tmp/x"}, []string{"RANK=0", "WORLD_SIZE=2"}, []string{"run id", "earlier run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Resolve(tc.flags, envOf(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if tc.flags.File == "" && (w.Transport() != "" || !strings.HasSuffix(w.String(), "rendezvous none given")) {
				t.Errorf("transport %q, %s", w.Transport(), w)
			}
			for _, err := range []error{w.Validate(), func() error { _, err := Share(context.Background(), w, id(1)); return err }()} {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("%v is not a *ConfigError", err)
				}
				for _, s := range tc.want {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
			}
		})
	}
}

// Env puts a child in the world it describes: Resolve reads back the same.
func TestEnvRoundTrip(t *testing.T) {
	for _, w := range []World{
		{Rank: 2, Size: 3, LocalRank: 0, Master: "127.0.0.1:29500", RunID: "r1", Source: "torchrun"},
		{Rank: 1, Size: 2, LocalRank: 1, Master: "[::1]:80", File: "/a/b", RunID: "r2", Source: "torchrun"},
	} {
		got, err := Resolve(Flags{}, envOf(w.Env()...))
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("got %+v, want %+v (env %q)", got, w, w.Env())
		}
	}
}

func TestFirstHost(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"gpu17", "gpu17"},
		{"gpu17,gpu18", "gpu17"},
		{"gpu[017-020,031]", "gpu017"},
		{"gpu[3,5]", "gpu3"},
		{"a1,gpu[1-2]", "a1"},
		{"gpu[1-2],cpu[3-4]", "gpu1"},
		{"node-a[1-4]", "node-a1"},
		{"r[1-2]n[1-4]", ""},
		{"gpu[1-2", ""},
		{"[1-2]", ""},
		{"gpu[a-b]", ""},
		{"", ""},
	} {
		got, err := FirstHost(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSlurmPort(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want int
	}{{"123456", 23456}, {"7", 20007}, {"1234_5", 22345}, {"99+1", 20991}} {
		if got := SlurmPort(tc.id); got != tc.want {
			t.Errorf("SlurmPort(%q) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

// FuzzResolve: any environment either resolves to a world that passes
// Validate, with the rank in range, or is refused with a *ConfigError; it
// never panics.
func FuzzResolve(f *testing.F) {
	f.Add("1", "4", "1", "10.0.0.5", "29500", "", "")
	f.Add("x", "2", "", "h", "1", "", "")
	f.Add("0", "2", "5", "[::1]", "99999", "-rank", "0")
	f.Add("", "", "", "", "", "gpu[01-04]", "12_3")
	f.Add("3", "", "", "a b", "", "n[1", "")
	f.Fuzz(func(t *testing.T, rank, size, local, addr, port, nodelist, job string) {
		var kv []string
		for _, p := range [][2]string{{"RANK", rank}, {"WORLD_SIZE", size}, {"LOCAL_RANK", local}, {"MASTER_ADDR", addr},
			{"MASTER_PORT", port}, {"SLURM_PROCID", rank}, {"SLURM_NTASKS", size}, {"SLURM_NODELIST", nodelist}, {"SLURM_JOB_ID", job},
			{"SLURM_STEP_ID", job}} {
			if p[1] != "" {
				kv = append(kv, p[0]+"="+p[1])
			}
		}
		w, err := Resolve(Flags{}, envOf(kv...))
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%v is not a *ConfigError", err)
			}
			return
		}
		if verr := w.checkRanks(); verr != nil || w.Rank < 0 || w.Rank >= w.Size {
			t.Fatalf("resolved %+v, which fails: %v", w, verr)
		}
	})
}

// TestLaunched: what a launcher gave the process, by Resolve's rule: a batch script's own shell
// under Slurm is no rank.
func TestLaunched(t *testing.T) {
	for _, c := range []struct {
		name       string
		env        map[string]string
		rank, size bool
	}{
		{"none", nil, false, false},
		{"torchrun", map[string]string{EnvRank: "1", EnvWorldSize: "2"}, true, true},
		{"RANK alone", map[string]string{EnvRank: "1"}, true, false},
		{"srun task", map[string]string{EnvSlurmStepID: "0", EnvSlurmProcID: "3", EnvSlurmNTasks: "4"}, true, true},
		{"batch shell", map[string]string{EnvSlurmProcID: "0", EnvSlurmNTasks: "4"}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []string{EnvRank, EnvWorldSize, EnvLocalRank, EnvSlurmStepID, "SLURM_STEPID", EnvSlurmStepNTasks, EnvSlurmProcID, EnvSlurmNTasks, EnvSlurmLocalID} {
				t.Setenv(n, "")
				os.Unsetenv(n)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if rank, size := Launched(); rank != c.rank || size != c.size {
				t.Errorf("Launched() = %v, %v; want %v, %v", rank, size, c.rank, c.size)
			}
		})
	}
}
