package cpustat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// MachineTimes is the whole machine's CPU time from /proc/stat, summed over
// all CPUs: Busy counts user, nice, system, irq and softirq time; Steal is
// time the hypervisor gave the machine's virtual CPUs to someone else.
type MachineTimes struct {
	Busy, Steal, Total time.Duration
}

// Sub returns the CPU time between an earlier reading and t.
func (t MachineTimes) Sub(earlier MachineTimes) MachineTimes {
	return MachineTimes{Busy: t.Busy - earlier.Busy, Steal: t.Steal - earlier.Steal, Total: t.Total - earlier.Total}
}

// userHZ is the unit of /proc/stat, USER_HZ, which Linux fixes at 100 for
// user space.
const userHZ = 100

// Machine reads /proc/stat, and reports false where it does not exist.
// It is rough: the kernel samples it at each clock tick.
func Machine() (MachineTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineTimes{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineTimes{}, false
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return MachineTimes{}, false
		}
		v[i] = n
	}
	tick := time.Second / userHZ
	return MachineTimes{
		Busy:  time.Duration(v[0]+v[1]+v[2]+v[5]+v[6]) * tick,
		Steal: time.Duration(v[7]) * tick,
		Total: time.Duration(v[0]+v[1]+v[2]+v[3]+v[4]+v[5]+v[6]+v[7]) * tick,
	}, true
}
