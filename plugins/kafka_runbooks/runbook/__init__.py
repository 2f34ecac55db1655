"""The application, as plain functions over hooks and the state store: what the operators (Airflow glue) call.

    task.py      the task a service runs for (who, where, its log) and what it says besides its log
    errors.py    Stop (the task fails saying why) and Skip (nothing to do)
    plans.py     a plan task's output is a reference; the recorded plan is loaded by its digest
    finding_records.py  findings pass between tasks as references; loaded typed from the incident's record
    restart.py   the restart: plan, use the approval, execute through the engine, close, recovered
    approval.py  the approval of every change: ask, answer
    election.py  the deferred preferred-replica election, and its schedule
    mitigate.py  mitigate first: move leadership off a broker that does not serve, and back
    incident.py  open an incident response, close it (or leave it to a person)
    detect.py    snapshot, detectors, the incident lifecycle's moves
    capture.py   evidence bundles over SSH, the intrusive tools' gate
    analyze.py   the analysis' findings and report joined to the incident
    response.py  restart or explain; the peers' follow-up
    summary.py   what a person is told (log, record, run note)
    cluster.py   the cluster's state now, for close-outs and summaries
"""
