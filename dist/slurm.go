package dist

import (
	"fmt"
	"strconv"
	"strings"
)

// FirstHost is the first host of a Slurm node list: "gpu17" from "gpu17",
// "gpu[017-020,031]" or "gpu17,gpu18", "gpu017" from "gpu[017-020]". Under
// srun's default block distribution task 0, the rank that listens, runs
// there. Lists with several bracket groups in one name ("r[1-2]n[1-4]") are
// not read: set MASTER_ADDR for those.
func FirstHost(nodelist string) (string, error) {
	s := strings.TrimSpace(nodelist)
	open := strings.IndexByte(s, '[')
	comma := strings.IndexByte(s, ',')
	if open < 0 || (comma >= 0 && comma < open) {
		// The first name carries no brackets.
		if comma >= 0 {
			s = s[:comma]
		}
		if s == "" {
			return "", fmt.Errorf("dist: node list %q: no host", nodelist)
		}
		return s, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return "", fmt.Errorf("dist: node list %q: unclosed '['", nodelist)
	}
	end += open
	if rest := s[end+1:]; rest != "" && rest[0] != ',' {
		return "", fmt.Errorf("dist: node list %q: a name with text after its brackets is not read; set %s", nodelist, EnvMasterAddr)
	}
	first := s[open+1 : end]
	if i := strings.IndexAny(first, ",-"); i >= 0 {
		first = first[:i]
	}
	if first == "" || strings.Trim(first, "0123456789") != "" {
		return "", fmt.Errorf("dist: node list %q: %q is not a number range", nodelist, s[open+1:end])
	}
	if s[:open] == "" {
		return "", fmt.Errorf("dist: node list %q: no host name before '['", nodelist)
	}
	return s[:open] + first, nil
}

// SlurmPort is the rendezvous port of a Slurm job that sets no MASTER_PORT:
// 20000 plus the job id's last four digits, the same on every task of the
// job and unlikely to clash with another job's on a shared node.
func SlurmPort(jobID string) int {
	n, err := strconv.Atoi(strings.TrimSpace(jobID))
	if err != nil || n < 0 {
		// An array job's "1234_5" or a heterogeneous job's "1234+0": the
		// digits still tell jobs apart.
		n = 0
		for _, c := range jobID {
			if c >= '0' && c <= '9' {
				n = (n*10 + int(c-'0')) % 10000
			}
		}
	}
	return 20000 + n%10000
}
