DROP TABLE instance_activity;
