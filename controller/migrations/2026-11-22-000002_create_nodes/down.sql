DROP TABLE nodes;
