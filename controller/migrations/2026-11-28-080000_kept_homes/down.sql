DROP TABLE kept_homes;
