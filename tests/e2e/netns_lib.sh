# Two "nodes" of network namespaces on a private bridge (sourced by
# netns_cluster.sh and netns_slurm.sh): each with its own address and, where
# a test enters it with `unshare --uts`, its own host name.
#
#   netns_names L BASE  names unique to this process and test letter L (at
#                       most 15 characters): NETA NETB (the namespaces), BR
#                       (the bridge, address ${SUB}1), IPA IPB (the nodes'
#                       addresses, ${SUB}11 and ${SUB}12 in 10.BASE+.x.0/24)
#   netns_setup         makes them; 1 where the kernel refuses (the caller skips)
#   netns_remove        kills what runs in them and removes them and the bridge

netns_names() {
    NS_L=$1
    NS_ID=$(($$ % 100000))
    NETA=fb${NS_L}${NS_ID}a NETB=fb${NS_L}${NS_ID}b BR=fb${NS_L}B${NS_ID}
    SUB=10.$(($2 + $$ % 40)).$(($$ / 40 % 250)).
    IPA=${SUB}11 IPB=${SUB}12
}

netns_setup() {
    ip link add "$BR" type bridge && ip addr add "${SUB}1/24" dev "$BR" && ip link set "$BR" up || return 1
    for x in a b; do
        n=fb${NS_L}${NS_ID}$x v=fb${NS_L}v${NS_ID}$x w=fb${NS_L}w${NS_ID}$x
        ip=${SUB}12
        [ $x = a ] && ip=${SUB}11
        ip netns add "$n" && ip link add "$v" type veth peer name "$w" && ip link set "$w" netns "$n" &&
            ip link set "$v" master "$BR" && ip link set "$v" up && ip netns exec "$n" ip addr add "$ip/24" dev "$w" &&
            ip netns exec "$n" ip link set "$w" up && ip netns exec "$n" ip link set lo up || return 1
    done
}

netns_remove() {
    for n in $NETA $NETB; do
        for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$n" 2>/dev/null
    done
    ip link del "$BR" 2>/dev/null
    true
}
