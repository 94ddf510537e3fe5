package daemon

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenFile is the file in the data dir that holds the admin token
// the daemon created because none was configured (docs/security.md,
// "The admin API"). utcpd manuals … reads it from there.
const AdminTokenFile = "admin-token"

// ensureAdminToken returns the admin token to require when none is
// configured: the one in dataDir's admin-token file, created (0600) at
// first start with 32 random bytes. With no data dir the token is new at
// every start and kept in memory only; stored reports which.
func ensureAdminToken(dataDir string) (token string, stored bool, err error) {
	if dataDir == "" {
		t, err := newAdminToken()
		return t, false, err
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	if t, err := ReadAdminToken(path); err == nil {
		return t, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", false, fmt.Errorf("creating the data dir for the admin token: %w", err)
	}
	t, err := newAdminToken()
	if err != nil {
		return "", false, err
	}
	// O_EXCL: two daemons starting on one data dir agree on one token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		t, err := ReadAdminToken(path)
		return t, err == nil, err
	}
	if err != nil {
		return "", false, fmt.Errorf("creating the admin token file: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("writing the admin token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("writing the admin token file: %w", err)
	}
	return t, true, nil
}

// ReadAdminToken reads an admin token file. A file others may read is
// refused: the token is a credential.
func ReadAdminToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the admin token file %s may be read by other users (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the admin token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the admin token file %s is empty: remove it to have a new token created", path)
	}
	return t, nil
}

func newAdminToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("creating an admin token: %w", err)
	}
	return "utcpd_adm_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
