package supervisor

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// PortRange is the agent's range for dynamic ports.
type PortRange struct{ Min, Max int }

// allocate picks a free port in r that is not in used and that nothing on
// the machine is listening on right now.
func (r PortRange) allocate(used map[int]bool) (int, error) {
	n := r.Max - r.Min + 1
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		p := r.Min + (start+i)%n
		if used[p] || !free(p) {
			continue
		}
		used[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port left in %d-%d: widen the agent's port range", r.Min, r.Max)
}

func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
