package kafka.api;

import java.util.ArrayList;
import java.util.List;

import kafka.utils.ZkUtils;

/** Contents of /brokers/topics/T/partitions/P/state, in Kafka 0.10's exact JSON field order. */
public final class LeaderAndIsr {
    public static final int NO_LEADER = -1;
    public final int leader;
    public final int leaderEpoch;
    public final List<Integer> isr;
    public final int controllerEpoch;
    public final int zkVersion;

    public LeaderAndIsr(int leader, int leaderEpoch, List<Integer> isr, int controllerEpoch, int zkVersion) {
        this.leader = leader;
        this.leaderEpoch = leaderEpoch;
        this.isr = new ArrayList<>(isr);
        this.controllerEpoch = controllerEpoch;
        this.zkVersion = zkVersion;
    }

    public static LeaderAndIsr parse(String json, int zkVersion) {
        return new LeaderAndIsr(ZkUtils.intField(json, "leader", NO_LEADER), ZkUtils.intField(json, "leader_epoch", 0),
                ZkUtils.intList(json, "isr"), ZkUtils.intField(json, "controller_epoch", 0), zkVersion);
    }

    public String toJson() {
        return "{\"controller_epoch\":" + controllerEpoch + ",\"leader\":" + leader + ",\"version\":1,\"leader_epoch\":"
                + leaderEpoch + ",\"isr\":[" + ZkUtils.csv(isr) + "]}";
    }

    @Override
    public String toString() {
        return "(Leader:" + leader + ",ISR:" + ZkUtils.csv(isr) + ",LeaderEpoch:" + leaderEpoch + ",ControllerEpoch:" + controllerEpoch + ")";
    }
}
