CREATE DATABASE concert_singer;
