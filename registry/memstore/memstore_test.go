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

func TestPinConformance(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) registry.PinStore {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
	storetest.RunPins(t, func(t *testing.T) registry.PinStore { return &registry.MemPins{} })
}
