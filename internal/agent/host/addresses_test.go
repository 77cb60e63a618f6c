package host

import (
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAddresses(t *testing.T) {
	lo := Interface{Name: "lo", Up: true, Loopback: true, Addrs: []net.IP{mustIP(t, "127.0.0.1"), mustIP(t, "::1")}}
	eth0 := Interface{Name: "eth0", Up: true, Addrs: []net.IP{mustIP(t, "fe80::1"), mustIP(t, "10.0.0.5"), mustIP(t, "2001:db8::5")}}
	eth1 := Interface{Name: "eth1", Up: true, Addrs: []net.IP{mustIP(t, "192.168.1.9")}}
	v6only := Interface{Name: "eth2", Up: true, Addrs: []net.IP{mustIP(t, "fe80::2"), mustIP(t, "2001:db8::2")}}
	down := Interface{Name: "eth3", Addrs: []net.IP{mustIP(t, "172.16.0.1")}}

	routeHeader := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	routeViaEth1 := routeHeader +
		"eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t0100000A\t0003\t0\t0\t200\t00000000\t0\t0\t0\n" +
		"eth1\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	routeDownDefault := routeHeader + "eth1\t00000000\t0101A8C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n"
	ipv6Default := "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth2\n" +
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"

	tests := []struct {
		name     string
		ifaces   []Interface
		files    map[string]string
		nodeIPs  []string
		hostname string
		want     []corev1.NodeAddress
		wantErr  string // a fragment the error must contain; "" means no error
	}{
		{
			name:     "the default route's interface gives the InternalIP, then the hostname follows",
			ifaces:   []Interface{lo, eth0, eth1},
			files:    map[string]string{"proc/net/route": routeViaEth1},
			hostname: "node-a",
			want: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.168.1.9"},
				{Type: corev1.NodeHostName, Address: "node-a"},
			},
		},
		{
			name:   "a default route that is not up is ignored and the first up interface's IPv4 is used",
			ifaces: []Interface{lo, down, eth0, eth1},
			files:  map[string]string{"proc/net/route": routeDownDefault},
			want:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}},
		},
		{
			name:   "without route tables the first global IPv4 of an up, non-loopback interface is used",
			ifaces: []Interface{lo, v6only, eth1},
			want:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.9"}},
		},
		{
			name:   "an IPv6 default route is used when there is no IPv4 one",
			ifaces: []Interface{lo, eth1, v6only},
			files:  map[string]string{"proc/net/route": routeHeader, "proc/net/ipv6_route": ipv6Default},
			want:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "2001:db8::2"}},
		},
		{
			name:   "a machine with only loopback gets 127.0.0.1",
			ifaces: []Interface{lo},
			want:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		},
		{
			name:     "a --node-ip assigned to an interface is the InternalIP",
			ifaces:   []Interface{lo, eth0, eth1},
			files:    map[string]string{"proc/net/route": routeViaEth1},
			nodeIPs:  []string{"10.0.0.5"},
			hostname: "node-a",
			want: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
				{Type: corev1.NodeHostName, Address: "node-a"},
			},
		},
		{
			name:    "a dual-stack --node-ip pair gives two InternalIPs in order",
			ifaces:  []Interface{lo, eth0},
			nodeIPs: []string{"2001:db8::5", "10.0.0.5"},
			want: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "2001:db8::5"},
				{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			},
		},
		{
			name:    "a --node-ip not assigned to this machine is refused",
			ifaces:  []Interface{lo, eth0},
			nodeIPs: []string{"10.9.9.9"},
			wantErr: "--node-ip 10.9.9.9 is not assigned",
		},
		{
			name:    "a loopback --node-ip is refused",
			ifaces:  []Interface{lo, eth0},
			nodeIPs: []string{"127.0.0.1"},
			wantErr: "--node-ip 127.0.0.1 is a loopback address",
		},
		{
			name:    "a link-local --node-ip is refused",
			ifaces:  []Interface{lo, eth0},
			nodeIPs: []string{"fe80::1"},
			wantErr: "link-local",
		},
		{
			name:    "two --node-ip addresses of one family are refused",
			ifaces:  []Interface{lo, eth0, eth1},
			nodeIPs: []string{"10.0.0.5", "192.168.1.9"},
			wantErr: "one IPv4 and one IPv6",
		},
		{
			name:    "three --node-ip addresses are refused",
			ifaces:  []Interface{lo, eth0, eth1},
			nodeIPs: []string{"10.0.0.5", "192.168.1.9", "2001:db8::5"},
			wantErr: "at most two",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Config{
				Root:       fakeRoot(t, tt.files),
				Interfaces: func() ([]Interface, error) { return tt.ifaces, nil },
			})
			var ips []net.IP
			for _, s := range tt.nodeIPs {
				ips = append(ips, mustIP(t, s))
			}
			got, err := h.Addresses(ips, tt.hostname)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Addresses() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Addresses() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Addresses() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAddressesInterfaceListFailure(t *testing.T) {
	boom := errors.New("netlink unavailable")
	h := New(Config{Root: t.TempDir(), Interfaces: func() ([]Interface, error) { return nil, boom }})
	if _, err := h.Addresses(nil, "n"); !errors.Is(err, boom) {
		t.Fatalf("Addresses() error = %v, want %v", err, boom)
	}
}

func TestNodeName(t *testing.T) {
	tests := []struct {
		name     string
		hostname *string // nil: no hostname file
		override string
		hostOver *string // --hostname-override
		want     string
		wantErr  string
	}{
		{name: "the override is trimmed and lower-cased", hostname: ptr("machine"), override: " Node-A.Example ", want: "node-a.example"},
		{name: "without an override the hostname is lower-cased", hostname: ptr("MyHost\n"), want: "myhost"},
		{name: "a blank override falls back to the hostname", hostname: ptr("myhost"), override: "  ", want: "myhost"},
		{name: "an override that is not a DNS subdomain names --node-name", hostname: ptr("ok"), override: "bad_name", wantErr: "--node-name"},
		{name: "a hostname that is not a DNS subdomain asks for --node-name", hostname: ptr("my_host"), wantErr: "--node-name"},
		{name: "an empty hostname is an error", hostname: ptr("\n"), wantErr: "hostname is empty"},
		{name: "an unreadable hostname is an error", wantErr: "read hostname"},
		{name: "the hostname override is trimmed and lower-cased and names the node", hostname: ptr("machine"), hostOver: ptr(" Web-1.Example\n"), want: "web-1.example"},
		{name: "--node-name wins over the hostname override", hostname: ptr("machine"), hostOver: ptr("web-1"), override: "node-a", want: "node-a"},
		{name: "a blank hostname override is an error naming the flag", hostname: ptr("machine"), hostOver: ptr("  "), wantErr: "--hostname-override is empty"},
		{name: "a hostname override that is not a DNS subdomain names the flag", hostname: ptr("machine"), hostOver: ptr("web_1"), wantErr: "--hostname-override"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			if tt.hostname != nil {
				files["proc/sys/kernel/hostname"] = *tt.hostname
			}
			h := fakeHost(t, files)
			h.cfg.HostnameOverride = tt.hostOver
			got, err := h.NodeName(tt.override)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NodeName(%q) = %q, %v; want an error containing %q", tt.override, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("NodeName(%q) = %q, %v; want %q", tt.override, got, err, tt.want)
			}
			if tt.hostOver != nil {
				// The HostName address and the hostname label follow the override.
				want := strings.ToLower(strings.TrimSpace(*tt.hostOver))
				if hn, err := h.Hostname(); err != nil || hn != want {
					t.Fatalf("Hostname() = %q, %v; want %q", hn, err, want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
