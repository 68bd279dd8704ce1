package metrics

// This file owns the cache of a metric's series by their labels: the
// runtime reports each event with label values, and looking a series up in
// a map by a comparable key costs no allocation, where a Prometheus vector's
// WithLabelValues may.

import "sync"

// cache maps label keys to series, made by with on first use. With max
// above zero it keeps at most max keys: a key past them is replaced by
// other(key), which is always kept.
type cache[K comparable, V any] struct {
	mu    sync.RWMutex
	m     map[K]V
	max   int
	with  func(K) V
	other func(K) K
}

func newCache[K comparable, V any](max int, with func(K) V) *cache[K, V] {
	return &cache[K, V]{m: map[K]V{}, max: max, with: with}
}

// get returns the series of k, making it the first time.
func (c *cache[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.max > 0 && len(c.m) >= c.max && c.other != nil {
		k = c.other(k)
		if v, ok := c.m[k]; ok {
			return v
		}
	}
	v = c.with(k)
	c.m[k] = v
	return v
}
