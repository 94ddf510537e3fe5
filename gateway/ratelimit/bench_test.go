package ratelimit

import (
	"fmt"
	"testing"
)

// BenchmarkAcquire is the cost a call pays for the rate limits: a call
// matching one rate rule and one concurrency cap out of 20 rules, from
// every core at once.
//
//	go test -run '^$' -bench Acquire -benchmem ./gateway/ratelimit/
func BenchmarkAcquire(b *testing.B) {
	rules := []Rule{{Tools: "demo.*", Rate: "1000000000/s"}, {Manuals: "demo", MaxConcurrent: 1 << 30}}
	for i := range 18 {
		rules = append(rules, Rule{Principal: fmt.Sprintf("key:%08x", i), Rate: "5/s"})
	}
	l, err := New(rules, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := l.Acquire(b.Context(), "", "demo", "demo.echo")
			if err != nil {
				b.Fatal(err)
			}
			tk.Release()
		}
	})
}
