package jobspec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults and limits of the job file format.
const (
	defaultCount           = 1
	maxCount               = 1000
	defaultRestartAttempts = 2
	defaultRestartInterval = 30 * time.Minute
	defaultRestartDelay    = 15 * time.Second
	defaultKillSignal      = "SIGTERM"
	defaultKillTimeout     = 5 * time.Second
	maxKillTimeout         = time.Hour
	maxAttempts            = math.MaxInt32
	maxPort                = 65535
	maxUserLen             = 32
	maxUID                 = 1<<32 - 2 // (uid_t)-1 is reserved
)

// linuxSignals are the signal names accepted for kill_signal, without the
// "SIG" prefix.
var linuxSignals = []string{
	"HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1",
	"SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP",
	"TSTP", "TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH",
	"IO", "PWR", "SYS",
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	envKeyRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	portLabelRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	userNameRE  = regexp.MustCompile(`^[a-z_][a-z0-9_-]*\$?$`)
	uidRE       = regexp.MustCompile(`^[0-9]+$`)
)

// checkName validates a job or task name; kind is "job" or "task".
func checkName(kind, name string) error {
	if nameRE.MatchString(name) {
		return nil
	}
	return fmt.Errorf("%s name %q must be 1 to 63 characters of letters, digits, \"_\", \".\" and \"-\", starting with a letter or digit (it becomes part of systemd unit names)", kind, name)
}

// checkEnvKey validates the name of an environment variable.
func checkEnvKey(key string) error {
	if !envKeyRE.MatchString(key) {
		return fmt.Errorf("environment variable name %q must consist of letters, digits and \"_\" and not start with a digit", key)
	}
	if strings.HasPrefix(key, VarPrefix) {
		return fmt.Errorf("environment variable names starting with %s are reserved for unitvisor; rename %q", VarPrefix, key)
	}
	return nil
}

// checkPortLabel validates the label of a port block.
func checkPortLabel(label string) error {
	if portLabelRE.MatchString(label) {
		return nil
	}
	return fmt.Errorf("port label %q must consist of letters, digits and \"_\" (it is used in ${%s<label>})", label, VarPortPrefix)
}

// checkUser validates a user name (Debian rules) or numeric uid.
func checkUser(user string) error {
	if uidRE.MatchString(user) {
		if uid, err := strconv.ParseUint(user, 10, 64); err != nil || uid > maxUID {
			return fmt.Errorf("uid %s is out of range; use 0 to %d", user, uint64(maxUID))
		}
		return nil
	}
	if len(user) <= maxUserLen && userNameRE.MatchString(user) {
		return nil
	}
	return fmt.Errorf("user %q is not a valid user name: use at most %d characters of lowercase letters, digits, \"_\" and \"-\", starting with a letter or \"_\" (optionally ending in \"$\"), or a numeric uid", user, maxUserLen)
}

// canonicalSignal returns the canonical name ("SIGTERM") of a signal given
// as "SIGTERM", "TERM" or "term".
func canonicalSignal(s string) (string, error) {
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if slices.Contains(linuxSignals, name) {
		return "SIG" + name, nil
	}
	names := make([]string, len(linuxSignals))
	for i, n := range linuxSignals {
		names[i] = "SIG" + n
	}
	return "", fmt.Errorf("unknown signal %q;%s use a Linux signal name such as SIGTERM, SIGINT or SIGQUIT (the SIG prefix is optional)", s, didYouMean(strings.ToUpper(s), names))
}

// parseDuration parses a non-negative Go duration.
func parseDuration(attr, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s = %q is not a duration; write a number with a unit, e.g. \"5s\" or \"1m30s\"", attr, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s = %q is negative; use a positive duration, e.g. \"5s\" or \"1m30s\"", attr, s)
	}
	return d, nil
}

// didYouMean returns ` did you mean "x"?` for the closest of candidates to
// name, or "" if none is close.
func didYouMean(name string, candidates []string) string {
	best, bestDist := "", 3 // suggest only names less than 3 edits away
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" did you mean %q?", best)
}

// editDistance returns the optimal string alignment distance between a and
// b in runes: the Levenshtein distance where swapping two adjacent runes
// also counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// rows[i%3] is row i of the usual dynamic programming table.
	var rows [3][]int
	for i := range rows {
		rows[i] = make([]int, len(rb)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur, prev, prev2 := rows[i%3], rows[(i-1)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
	}
	return rows[len(ra)%3][len(rb)]
}
