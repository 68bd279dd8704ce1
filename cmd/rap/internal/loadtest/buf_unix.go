//go:build unix

package loadtest

import (
	"syscall"
	"time"
	"unsafe"
)

// durationBuffer returns an empty slice with room for n durations, mapped
// outside the Go heap where the platform allows: the generator's buffers
// then do not raise the heap size that paces the garbage collector, which
// an in-process tool server would otherwise see as a larger heap than its
// own and collect less often. release unmaps it; the slice must not be
// used after. A slice that outgrows the mapping moves to the Go heap, as
// append does.
func durationBuffer(n int) (buf []time.Duration, release func()) {
	if n <= 0 {
		return nil, func() {}
	}
	size := n * int(unsafe.Sizeof(time.Duration(0)))
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]time.Duration, 0, n), func() {}
	}
	buf = unsafe.Slice((*time.Duration)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0]
	return buf, func() { _ = syscall.Munmap(mem) }
}
