package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"xferbench/servers/go/internal/errs"
)

// numCodes is how many gRPC codes there are (OK through Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// methodObservers are one method's series, looked up once: WithLabelValues
// hashes its labels and takes the vector's lock on every call, which the
// per-call path (one Done per RPC or frame call) should not pay. A code's
// counter is made the first time the code is seen, so /metrics shows only
// the codes that happened, as before.
type methodObservers struct {
	duration prometheus.Observer
	byCode   [numCodes]atomic.Pointer[prometheus.Counter]
}

// observerCache maps a method name to its series. Reads are one atomic load
// and a map lookup (no lock, no allocation); a new method copies the map.
type observerCache struct {
	mu      sync.Mutex // serialises adding a method
	methods atomic.Pointer[map[string]*methodObservers]
}

// get returns the method's series, making them on first use.
func (c *observerCache) get(t *Transport, method string) *methodObservers {
	if m := c.methods.Load(); m != nil {
		if o, ok := (*m)[method]; ok {
			return o
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.methods.Load()
	if old != nil {
		if o, ok := (*old)[method]; ok {
			return o
		}
	}
	next := make(map[string]*methodObservers, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	o := &methodObservers{duration: t.m.durations.WithLabelValues(t.name, method)}
	next[method] = o
	c.methods.Store(&next)
	return o
}

// counter returns the requests counter of (method, code).
func (o *methodObservers) counter(t *Transport, method string, code errs.Code) prometheus.Counter {
	if int(code) >= numCodes {
		return t.m.requests.WithLabelValues(t.name, method, code.String())
	}
	if p := o.byCode[code].Load(); p != nil {
		return *p
	}
	c := t.m.requests.WithLabelValues(t.name, method, code.String()) // the same child if two calls race here
	o.byCode[code].Store(&c)
	return c
}
