package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
)

// loadConfig reads a UTCP client configuration, printing its warnings to
// warn (repeated ones summarised). A configuration that cannot be used is an exitUsage error listing
// every problem.
func loadConfig(path string, strict bool, warn io.Writer) (*manuals.Config, error) {
	cfg, err := manuals.LoadConfig(path, manuals.Options{Strict: strict, Parser: transports.Default})
	if err != nil {
		if ps := manuals.ProblemsOf(err); len(ps) > 0 {
			for _, p := range ps {
				fmt.Fprintln(warn, p.String())
			}
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("%s: %s", path, count(len(ps), "problem", ""))}
		}
		return nil, &exitError{code: exitUsage, err: err}
	}
	for _, p := range manuals.Summarize(cfg.WarningProblems()) {
		fmt.Fprintln(warn, p.String())
	}
	return cfg, nil
}

// newGateway builds a gateway from cfg and registers its manuals. Manuals
// that fail to register are reported to warn; the others serve.
func newGateway(ctx context.Context, cfg *manuals.Config, log *slog.Logger, warn io.Writer) (*gateway.Gateway, error) {
	return newGatewayWith(ctx, cfg, log, warn, nil)
}

// newGatewayWith is newGateway with the configuration's guard chain
// (without an approver: a review verdict denies) and an auditor (nil:
// none). A guard chain that does not load is an exitUsage error naming
// the entry.
func newGatewayWith(ctx context.Context, cfg *manuals.Config, log *slog.Logger, warn io.Writer, auditor gateway.Auditor) (*gateway.Gateway, error) {
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	chain, err := cliChain(cfg, vars, log)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	// The configuration's rate limits hold in-process too (utcpd mcp
	// --config serves a long session); buckets are this process's own.
	settings := defaultSettings()
	daemon.ApplyGateway(&settings, cfg, nil, false)
	var limiter *ratelimit.Limiter
	if len(settings.RateLimits) > 0 {
		if limiter, err = ratelimit.New(settings.RateLimits, ratelimit.Options{Logger: log}); err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
	}
	g, err := gateway.New(gateway.Options{
		RateLimits:        limiter,
		Guard:             chain,
		Audit:             auditor,
		Transports:        transports.Default,
		Variables:         vars,
		PostProcessors:    cfg.PostProcessors,
		TagWeight:         cfg.SearchStrategy.TagWeight,
		DescriptionWeight: cfg.SearchStrategy.DescriptionWeight,
		SearchStrategy:    cfg.SearchStrategy.Type,
		Logger:            log,
	})
	if err != nil {
		return nil, err
	}
	raws := make([]json.RawMessage, len(cfg.ManualCallTemplates))
	for i, t := range cfg.ManualCallTemplates {
		raws[i] = t.Raw
	}
	for i, res := range g.RegisterManuals(ctx, raws, gateway.RegisterOptions{Source: "config"}) {
		if res.Err != nil {
			fmt.Fprintf(warn, "%s: manual %q not registered: %v\n", cfg.ManualCallTemplates[i].Location, res.Name, res.Err)
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(warn, "warning: manual %q: %s\n", res.Name, w)
		}
	}
	return g, nil
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
