package memstore_test

import (
	"testing"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/registry/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) registry.Store { return memstore.New() })
}
