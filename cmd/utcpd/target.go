package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// targetFlags choose where tools and call commands run: against a running
// daemon (--server, or $UTCPD_SERVER) or in-process from a configuration
// file (--config, or $UTCPD_CONFIG). With none of them, a ./utcpd.json
// runs in-process and otherwise the local daemon at 127.0.0.1:8787 is used.
type targetFlags struct {
	config string
	strict bool
	server string
	apiKey string
}

func (f *targetFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", defaultConfigFile, "in-process: UTCP client configuration to load (default $UTCPD_CONFIG, else utcpd.json)")
	fl.BoolVar(&f.strict, "strict", false, "in-process: treat unknown configuration fields as errors")
	fl.StringVarP(&f.server, "server", "s", "", "use the running daemon at this URL (default http://127.0.0.1:8787 when there is no ./utcpd.json) [$UTCPD_SERVER]")
	fl.StringVar(&f.apiKey, "api-key", "", "with --server: API key for the REST front; prefer $UTCPD_API_KEY, flags show in ps [$UTCPD_API_KEY]")
}

// remote returns the daemon client when the command runs against a
// daemon, nil when it runs in-process. Giving both --server and --config
// is a usage error.
func (f *targetFlags) remote(cmd *cobra.Command) (*client, error) {
	server := f.server
	if server == "" && !cmd.Flags().Changed("config") {
		server = serverFromEnv()
		// With neither flag nor environment, use ./utcpd.json when it
		// exists and the local daemon otherwise.
		if server == "" && os.Getenv(envConfig) == "" {
			if _, err := os.Stat(defaultConfigFile); err != nil {
				server = "http://" + defaultListen
			}
		}
	}
	if server == "" {
		return nil, nil
	}
	if cmd.Flags().Changed("config") {
		return nil, &exitError{code: exitUsage, err: errors.New("--server and --config exclude each other: use a running daemon or a configuration file")}
	}
	key := f.apiKey
	if key == "" {
		key = os.Getenv(envAPIKey)
	}
	return newClient(server, key)
}

// open loads the configuration and registers its manuals in-process.
func (f *targetFlags) open(cmd *cobra.Command) (*gateway.Gateway, error) {
	g, _, err := f.openAudited(cmd, false)
	return g, err
}

// openAudited is open that, when audited, also records the gateway's
// calls in the audit log of the daemon's data directory (front "cli")
// when that directory already holds a store. Call done when finished
// with the gateway (after closing it).
func (f *targetFlags) openAudited(cmd *cobra.Command, audited bool) (g *gateway.Gateway, done func(), err error) {
	path := f.config
	if !cmd.Flags().Changed("config") {
		if v := os.Getenv(envConfig); v != "" {
			path = v
		}
	}
	cfg, err := loadConfig(path, f.strict, cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	done = func() {}
	var auditor gateway.Auditor
	if audited {
		auditor, done = cliAuditor(cmd.Context(), cfg, cmd.ErrOrStderr())
	}
	if auditor == nil {
		g, err = newGateway(cmd.Context(), cfg, discardLogger(), cmd.ErrOrStderr())
	} else {
		g, err = newGatewayWith(cmd.Context(), cfg, discardLogger(), cmd.ErrOrStderr(), auditor)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return g, done, nil
}

// describe formats an error for the terminal: "code: message" for an
// error with a code, with the close matches of a tool_not_found.
func describe(err error) string {
	var re *remoteError
	if errors.As(err, &re) {
		return re.Error()
	}
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", ue.Code, err.Error())
	if names, _ := ue.Details["did_you_mean"].([]string); len(names) > 0 {
		msg += " (did you mean " + strings.Join(names, ", ") + "?)"
	}
	return msg
}
