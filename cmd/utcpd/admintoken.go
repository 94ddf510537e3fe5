package main

import (
	"os"
	"path/filepath"

	"github.com/utcpd/utcpd/daemon"
)

// adminTokenFile is the file in the data dir that holds the admin token
// the daemon created because none was configured.
const adminTokenFile = daemon.AdminTokenFile

// storedAdminToken returns the token of the admin-token file in the data
// dir a local daemon uses ($UTCPD_DATA_DIR, else the default data dir),
// "" when there is none. The CLI uses it when no token is given.
func storedAdminToken() string {
	dir := os.Getenv(envDataDir)
	if dir == "" {
		dir = defaultDataDir()
	}
	t, err := daemon.ReadAdminToken(filepath.Join(dir, adminTokenFile))
	if err != nil {
		return ""
	}
	return t
}
