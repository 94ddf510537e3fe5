package daemon

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/ratelimit"
)

// KeyRules returns rules followed by one rule per named key with a
// rate_limit or a max_concurrent: Principal the key's name, Rate and
// MaxConcurrent the key's, named "apikey:<name>" (a prefix the
// configuration's own rules may not use).
func KeyRules(rules []ratelimit.Rule, keys []gateway.APIKey) []ratelimit.Rule {
	out := slices.Clone(rules)
	for _, k := range keys {
		if k.RateLimit == nil && k.MaxConcurrent <= 0 {
			continue
		}
		r := ratelimit.Rule{Name: ratelimit.KeyRulePrefix + k.Name, Principal: k.Name, MaxConcurrent: max(k.MaxConcurrent, 0)}
		if k.RateLimit != nil {
			r.Rate = k.RateLimit.String()
		}
		out = append(out, r)
	}
	return out
}

// newRateLimiter builds the limiter of gateway.rate_limits; nil when
// there are no rules. shared, when not nil, holds the buckets that
// replicas share (the PostgreSQL store).
func newRateLimiter(rules []ratelimit.Rule, shared ratelimit.SharedStore, log *slog.Logger) (*ratelimit.Limiter, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	l, err := ratelimit.New(rules, ratelimit.Options{Shared: shared, Logger: log})
	if err != nil {
		return nil, err
	}
	rateLimiterNow.Store(l)
	rateMetricsOnce.Do(func() {
		if err := prometheus.DefaultRegisterer.Register(rateCollector{}); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic("registering rate limit metrics: " + err.Error())
			}
		}
	})
	return l, nil
}

var (
	rateLimiterNow  atomic.Pointer[ratelimit.Limiter]
	rateMetricsOnce sync.Once

	rateRefused = prometheus.NewDesc("utcpd_rate_limit_refused_total",
		"Calls refused by a rule of gateway.rate_limits, by rule (its name, else its index) and limit (rate or max_concurrent).",
		[]string{"rule", "limit"}, nil)
	rateInFlight = prometheus.NewDesc("utcpd_rate_limit_in_flight",
		"Calls in flight counted against a rule's max_concurrent, by rule (rules with a cap only).",
		[]string{"rule"}, nil)
)

// rateCollector reports the counters of the daemon's current limiter.
type rateCollector struct{}

func (rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateRefused
	ch <- rateInFlight
}

func (rateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range rateLimiterNow.Load().Stats() {
		ch <- prometheus.MustNewConstMetric(rateRefused, prometheus.CounterValue, float64(s.RefusedRate), s.Rule, "rate")
		ch <- prometheus.MustNewConstMetric(rateRefused, prometheus.CounterValue, float64(s.RefusedConcurrency), s.Rule, "max_concurrent")
		if s.MaxConcurrent > 0 {
			ch <- prometheus.MustNewConstMetric(rateInFlight, prometheus.GaugeValue, float64(s.InFlight), s.Rule)
		}
	}
}
