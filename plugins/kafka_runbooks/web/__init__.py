"""kafka-runbooks in Airflow's api-server: a FastAPI app (``app.py``) mounted at ``/kafka-runbooks`` by an Airflow
plugin (``plugin.py``; registered by ``plugins/kafka_runbooks_web.py`` in the plugins folder), behind the
api-server's own authentication. It reads the product's state database only. Today: the fleet overview
(``GET /kafka-runbooks/api/fleet``); the incidents UI is to be built on this app.
"""
