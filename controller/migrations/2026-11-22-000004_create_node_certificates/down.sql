DROP TABLE node_certificates;
