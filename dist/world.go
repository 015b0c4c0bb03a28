package dist

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The environment variables Resolve reads. Launch tools set the torchrun
// names for the processes they start (ooc launch does too); Slurm's srun sets
// the SLURM_ ones for every task.
const (
	EnvRank       = "RANK"        // torchrun: this process's rank, 0..WORLD_SIZE-1
	EnvWorldSize  = "WORLD_SIZE"  // torchrun: the number of processes
	EnvLocalRank  = "LOCAL_RANK"  // torchrun: the rank among the processes of this machine
	EnvMasterAddr = "MASTER_ADDR" // rank 0's host, for the TCP rendezvous
	EnvMasterPort = "MASTER_PORT" // rank 0's port, for the TCP rendezvous

	EnvSlurmProcID     = "SLURM_PROCID"
	EnvSlurmNTasks     = "SLURM_NTASKS"
	EnvSlurmStepNTasks = "SLURM_STEP_NUM_TASKS" // srun's task count for this step; preferred to SLURM_NTASKS
	EnvSlurmLocalID    = "SLURM_LOCALID"
	EnvSlurmNodeList   = "SLURM_STEP_NODELIST" // then SLURM_JOB_NODELIST, SLURM_NODELIST
	EnvSlurmLaunchIP   = "SLURM_LAUNCH_NODE_IPADDR"
	EnvSlurmJobID      = "SLURM_JOB_ID"
	EnvSlurmStepID     = "SLURM_STEP_ID" // set by srun for its tasks: the Slurm variables describe this process

	EnvFile  = "OOC_RENDEZVOUS_FILE" // a path every rank sees: the file rendezvous
	EnvRunID = "OOC_RUN_ID"          // a token unique to one run, shared by its ranks
)

// DefaultTimeout bounds a rendezvous when World.Timeout is zero: ranks of a
// cluster job may start minutes apart, but not forever.
const DefaultTimeout = 10 * time.Minute

// World is the set of processes one training run spans, as one of them sees it.
type World struct {
	Rank      int // this process, 0..Size-1; rank 0 makes what Share hands out
	Size      int // the number of processes; 1 is a run on its own
	LocalRank int // the rank among the processes on this machine (picks its GPU)

	// Master is rank 0's "host:port" for the TCP rendezvous.
	Master string
	// File is a path every rank can read and rank 0 can write, for the file
	// rendezvous; when set it is used instead of Master.
	File string
	// RunID tells this run's rendezvous from an earlier one's: a file or a
	// rank from another run is not taken. See the package doc.
	RunID string
	// Timeout bounds Share; 0 is DefaultTimeout.
	Timeout time.Duration

	// Source says where the world came from: "flags", "torchrun", "slurm",
	// or "" for a process on its own.
	Source string
}

// Multi reports whether the process is one of several: whether it must meet
// the others before training.
func (w World) Multi() bool { return w.Size > 1 }

// Transport names how Share meets the other ranks: "file", "tcp", or ""
// for a process on its own or one given no rendezvous (Share refuses it).
func (w World) Transport() string {
	switch {
	case !w.Multi():
		return ""
	case w.File != "":
		return "file"
	case w.Master != "":
		return "tcp"
	}
	return ""
}

func (w World) String() string {
	if !w.Multi() {
		return "a single process"
	}
	s := fmt.Sprintf("rank %d of %d (local rank %d, from %s), rendezvous ", w.Rank, w.Size, w.LocalRank, w.Source)
	switch w.Transport() {
	case "file":
		return s + "file " + w.File
	case "tcp":
		return s + "tcp " + w.Master
	}
	return s + "none given"
}

// Env is the environment that puts a process in w (the torchrun names, the
// run id and the rendezvous file): what a launcher sets for each child.
func (w World) Env() []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(w.Rank),
		EnvWorldSize + "=" + strconv.Itoa(w.Size),
		EnvLocalRank + "=" + strconv.Itoa(w.LocalRank),
	}
	if host, port, err := net.SplitHostPort(w.Master); err == nil {
		env = append(env, EnvMasterAddr+"="+host, EnvMasterPort+"="+port)
	}
	if w.File != "" {
		env = append(env, EnvFile+"="+w.File)
	}
	if w.RunID != "" {
		env = append(env, EnvRunID+"="+w.RunID)
	}
	return env
}

// Validate checks what Share needs: ranks in range, and a rendezvous (with a
// run id for the file one) when there are several processes.
func (w World) Validate() error {
	if err := w.checkRanks(); err != nil {
		return err
	}
	switch {
	case !w.Multi():
		return nil
	case w.File != "":
		if w.RunID == "" {
			return &ConfigError{Name: "run id", Reason: "the file rendezvous needs a run id shared by all ranks and unique to this run (-run-id or $" +
				EnvRunID + "), so that a file left by an earlier run is not taken"}
		}
		return nil
	case w.Master == "":
		return &ConfigError{Name: "rendezvous", Reason: fmt.Sprintf("rank %d of %d has no way to meet the others: set %s and %s (or -master host:port), or -rendezvous-file",
			w.Rank, w.Size, EnvMasterAddr, EnvMasterPort)}
	}
	if _, err := parseMaster("master", w.Master); err != nil {
		return err
	}
	return nil
}

// checkRanks is what Resolve checks: the ranks and the timeout, not the
// rendezvous (a caller may hand the id out its own way).
func (w World) checkRanks() error {
	switch {
	case w.Size < 1:
		return &ConfigError{Name: "world size", Value: strconv.Itoa(w.Size), Reason: "must be at least 1"}
	case w.Rank < 0 || w.Rank >= w.Size:
		return &ConfigError{Name: "rank", Value: strconv.Itoa(w.Rank), Reason: fmt.Sprintf("out of range for world size %d (0..%d)", w.Size, w.Size-1)}
	case w.LocalRank < 0 || w.LocalRank >= w.Size:
		return &ConfigError{Name: "local rank", Value: strconv.Itoa(w.LocalRank), Reason: fmt.Sprintf("out of range for world size %d (0..%d)", w.Size, w.Size-1)}
	case w.Timeout < 0:
		return &ConfigError{Name: "rendezvous timeout", Value: w.Timeout.String(), Reason: "must not be negative"}
	}
	return nil
}

// ConfigError is a world that cannot be: it names the setting (a flag or an
// environment variable) and its value.
type ConfigError struct {
	Name, Value, Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return "dist: " + e.Name + ": " + e.Reason
	}
	return fmt.Sprintf("dist: %s %q: %s", e.Name, e.Value, e.Reason)
}

// Flags are a world's explicit settings, as a command line gives them; an
// empty field was not given. They win over the environment, but one that
// differs from the environment's value is an error, not a silent choice.
type Flags struct {
	Rank, WorldSize, LocalRank string
	Master                     string // host:port
	File                       string
	RunID                      string
	Timeout                    time.Duration
}

// Register adds -rank, -world-size, -local-rank, -master, -rendezvous-file,
// -run-id and -rendezvous-timeout to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Rank, "rank", "", "this process's rank, 0..world size-1 (default: $RANK, $SLURM_PROCID, or 0)")
	fs.StringVar(&f.WorldSize, "world-size", "", "the number of processes of the run (default: $WORLD_SIZE, $SLURM_NTASKS, or 1)")
	fs.StringVar(&f.LocalRank, "local-rank", "", "the rank among this machine's processes (default: $LOCAL_RANK, $SLURM_LOCALID, or the rank)")
	fs.StringVar(&f.Master, "master", "", "rank 0's host:port for the TCP rendezvous (default: $MASTER_ADDR:$MASTER_PORT)")
	fs.StringVar(&f.File, "rendezvous-file", "", "meet through this file on a path every rank sees, instead of TCP (default: $"+EnvFile+")")
	fs.StringVar(&f.RunID, "run-id", "", "a token unique to this run, the same on every rank (default: $"+EnvRunID+", torchrun's or Slurm's job id)")
	fs.DurationVar(&f.Timeout, "rendezvous-timeout", 0, "how long ranks wait for each other (default "+DefaultTimeout.String()+")")
}

// FromEnv resolves the world from explicit settings and the process
// environment; see Resolve.
func FromEnv(explicit Flags) (World, error) { return Resolve(explicit, os.LookupEnv) }

// Resolve works out the world from the explicit settings, then torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), then
// Slurm's (SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID;
// rank 0's host from the step's node list or SLURM_LAUNCH_NODE_IPADDR) in a
// task srun started (SLURM_STEP_ID or SLURM_STEP_NUM_TASKS set), read
// through lookup. Torchrun's variables, when RANK or WORLD_SIZE is set, hide
// Slurm's: a launcher run inside a Slurm task sets them for its children.
// With none of them the world is the process on its own. Resolve checks the
// values; whether the ranks can meet (a master, or a file and a run id) is
// Validate's, which Share calls.
func Resolve(explicit Flags, lookup func(string) (string, bool)) (World, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	env, err := environment(lookup)
	if err != nil {
		return World{}, err
	}
	w := World{Timeout: explicit.Timeout}
	if w.Size, err = pick("-world-size", explicit.WorldSize, env.size, 1); err != nil {
		return World{}, err
	}
	if w.Rank, err = pick("-rank", explicit.Rank, env.rank, 0); err != nil {
		return World{}, err
	}
	if w.LocalRank, err = pick("-local-rank", explicit.LocalRank, env.local, w.Rank); err != nil {
		return World{}, err
	}
	if err := incomplete(explicit, env); err != nil {
		return World{}, err
	}
	if w.Master, err = pickMaster(explicit.Master, env.master); err != nil {
		return World{}, err
	}
	if w.File, err = pickString("-rendezvous-file", explicit.File, env.file); err != nil {
		return World{}, err
	}
	if w.RunID, err = pickString("-run-id", explicit.RunID, env.runID); err != nil {
		return World{}, err
	}
	w.Source = env.source
	if explicit.Rank != "" || explicit.WorldSize != "" {
		if env.source == "" {
			w.Source = "flags"
		} else {
			w.Source = "flags and " + env.source
		}
	}
	if !w.Multi() {
		w.Source = ""
	}
	if err := w.checkRanks(); err != nil {
		return World{}, err
	}
	return w, nil
}

// setting is one value the environment gives: name is the variable (or
// variables) it came from, for errors.
type setting struct{ name, value string }

func (s setting) set() bool { return s.name != "" }

// envWorld is what the environment says, before the explicit settings.
type envWorld struct {
	source                                 string
	rank, size, local, master, file, runID setting
}

// incomplete refuses a rank without a world size and the reverse: the
// default that would fill the gap (rank 0, or a world of one) is never what
// the user meant.
func incomplete(explicit Flags, env envWorld) error {
	hasRank, hasSize := explicit.Rank != "" || env.rank.set(), explicit.WorldSize != "" || env.size.set()
	switch {
	case hasRank && !hasSize && explicit.Rank != "":
		return &ConfigError{Name: "-rank", Value: explicit.Rank, Reason: "needs -world-size (or $" + EnvWorldSize + ")"}
	case hasRank && !hasSize:
		return &ConfigError{Name: env.rank.name, Value: env.rank.value, Reason: "is set but " + EnvWorldSize + " is not (nor -world-size)"}
	case hasSize && !hasRank && explicit.WorldSize != "":
		return &ConfigError{Name: "-world-size", Value: explicit.WorldSize, Reason: "needs -rank (or $" + EnvRank + ")"}
	case hasSize && !hasRank && env.source == "torchrun":
		return &ConfigError{Name: env.size.name, Value: env.size.value, Reason: "is set but " + EnvRank + " is not (nor -rank)"}
	}
	return nil
}

// getter reads the first of several names that is set.
func getter(lookup func(string) (string, bool)) func(...string) setting {
	return func(names ...string) setting {
		for _, n := range names {
			if v, ok := lookup(n); ok {
				return setting{n, v}
			}
		}
		return setting{}
	}
}

// launcherRanks reads the rank, world size and local rank a launcher set:
// torchrun's, or Slurm's in a task srun started.
func launcherRanks(get func(...string) setting) envWorld {
	var e envWorld
	switch {
	case get(EnvRank, EnvWorldSize).set():
		e.source = "torchrun"
		e.rank, e.size, e.local = get(EnvRank), get(EnvWorldSize), get(EnvLocalRank)
	case get(EnvSlurmStepID, "SLURM_STEPID", EnvSlurmStepNTasks).set() && get(EnvSlurmProcID, EnvSlurmNTasks, EnvSlurmStepNTasks).set():
		// A task srun started. A batch script's own shell has SLURM_PROCID
		// and SLURM_NTASKS too, of the allocation, but no step: it is not a
		// rank, and would wait for ranks that never start.
		e.source = "slurm"
		e.rank, e.size, e.local = get(EnvSlurmProcID), get(EnvSlurmStepNTasks, EnvSlurmNTasks), get(EnvSlurmLocalID)
	}
	return e
}

// Launched reports whether this process's environment gives it a rank and
// a world size (torchrun's variables, or Slurm's in a task srun started),
// read by the rule FromEnv reads them with.
func Launched() (rank, size bool) {
	e := launcherRanks(getter(os.LookupEnv))
	return e.rank.set(), e.size.set()
}

func environment(lookup func(string) (string, bool)) (envWorld, error) {
	get := getter(lookup)
	e := launcherRanks(get)
	var err error
	if e.master, err = envMaster(get, e.source == "slurm"); err != nil {
		return envWorld{}, err
	}
	e.file = get(EnvFile)
	e.runID = runID(lookup)
	return e, nil
}

// envMaster joins MASTER_ADDR and MASTER_PORT; under Slurm, missing ones
// come from the node list (or the launch node) and the job id.
func envMaster(get func(...string) setting, slurm bool) (setting, error) {
	addr, port := get(EnvMasterAddr), get(EnvMasterPort)
	if slurm && !addr.set() {
		if nl := get(EnvSlurmNodeList, "SLURM_JOB_NODELIST", "SLURM_NODELIST"); nl.set() {
			if h, err := FirstHost(nl.value); err == nil {
				addr = setting{nl.name, h}
			}
		}
		if !addr.set() {
			addr = get(EnvSlurmLaunchIP)
		}
	}
	if slurm && !port.set() {
		if id := get(EnvSlurmJobID); id.set() {
			port = setting{id.name, strconv.Itoa(SlurmPort(id.value))}
		}
	}
	switch {
	case !addr.set() && !port.set():
		return setting{}, nil
	case !addr.set():
		return setting{}, &ConfigError{Name: port.name, Value: port.value, Reason: "is set but " + EnvMasterAddr + " is not"}
	case !port.set():
		return setting{}, &ConfigError{Name: addr.name, Value: addr.value, Reason: "is set but " + EnvMasterPort + " is not"}
	}
	return setting{addr.name + " and " + port.name, net.JoinHostPort(addr.value, port.value)}, nil
}

// runID is the first token that names this run on every rank: ours, then
// torchrun's, then Slurm's job and step. A restart (torchrun's restart
// count, a Slurm requeue) is another run: its count is part of the id.
func runID(lookup func(string) (string, bool)) setting {
	join := func(names ...string) string {
		var parts []string
		for _, n := range names {
			if v, ok := lookup(n); ok && v != "" {
				parts = append(parts, v)
			}
		}
		return strings.Join(parts, ".")
	}
	if v, ok := lookup(EnvRunID); ok {
		return setting{EnvRunID, v}
	}
	if v, ok := lookup("TORCHELASTIC_RUN_ID"); ok && v != "" {
		return setting{"TORCHELASTIC_RUN_ID", join("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")}
	}
	if v, ok := lookup(EnvSlurmJobID); ok && v != "" {
		return setting{EnvSlurmJobID, "slurm-" + join(EnvSlurmJobID, "SLURM_STEP_ID", "SLURM_RESTART_COUNT")}
	}
	return setting{}
}

// pick is an integer setting: the flag's, the environment's, or def; a flag
// and a variable that disagree are an error.
func pick(flagName, flagValue string, env setting, def int) (int, error) {
	var fv, ev int
	var err error
	if flagValue != "" {
		if fv, err = atoi(flagName, flagValue); err != nil {
			return 0, err
		}
	}
	if env.set() {
		if ev, err = atoi(env.name, env.value); err != nil {
			return 0, err
		}
	}
	switch {
	case flagValue != "" && env.set() && fv != ev:
		return 0, conflict(flagName, flagValue, env)
	case flagValue != "":
		return fv, nil
	case env.set():
		return ev, nil
	}
	return def, nil
}

func pickString(flagName, flagValue string, env setting) (string, error) {
	if flagValue != "" && env.set() && flagValue != env.value {
		return "", conflict(flagName, flagValue, env)
	}
	if flagValue != "" {
		return flagValue, nil
	}
	return env.value, nil
}

func pickMaster(flagValue string, env setting) (string, error) {
	var f, e string
	var err error
	if flagValue != "" {
		if f, err = parseMaster("-master", flagValue); err != nil {
			return "", err
		}
	}
	if env.set() {
		if e, err = parseMaster(env.name, env.value); err != nil {
			return "", err
		}
	}
	if f != "" && e != "" && f != e {
		return "", conflict("-master", flagValue, env)
	}
	if f != "" {
		return f, nil
	}
	return e, nil
}

func conflict(flagName, flagValue string, env setting) error {
	return &ConfigError{Name: flagName, Value: flagValue, Reason: fmt.Sprintf("conflicts with %s=%q from the environment (leave one out, or make them agree)", env.name, env.value)}
}

func atoi(name, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, &ConfigError{Name: name, Value: s, Reason: "not a whole number"}
	}
	return n, nil
}

// parseMaster checks a "host:port" and returns it in net.JoinHostPort's form.
func parseMaster(name, s string) (string, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return "", &ConfigError{Name: name, Value: s, Reason: "not a host:port address: " + strings.TrimPrefix(err.Error(), "address "+s+": ")}
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/()") {
		return "", &ConfigError{Name: name, Value: s, Reason: fmt.Sprintf("the host %q is not a host name or IP address", host)}
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", &ConfigError{Name: name, Value: s, Reason: fmt.Sprintf("the port %q is not a number in 1..65535", port)}
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
